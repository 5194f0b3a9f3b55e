"""The incident's message before its diagnosis: what the alert said, and "diagnosing…" (pure).

Issue 29: the message goes out when the diagnosis starts, not when it ends, so a host
whose ``nvidia-smi`` hangs still has its message within seconds; the same message is
edited into the full card (``bot.chat.render.render_incident``) when the probes answer or
time out. Like every card it is rendered from the stored incident (kind, host, severity,
when it fired, the labels that say more than the card already does), never from a
request's payload. All alert text is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.chat import summary
from bot.chat.base import ChatMessage, Section
from bot.chat.incident_view import Marks, incident_buttons, status_lines
from bot.chat.text import clip, escape, mention
from bot.core import fmt, strings
from bot.domain.incident import Incident
from bot.domain.kinds import DIAG_SUMMARY, REQUESTED_BY
from bot.domain.lifecycle import IncidentState
from bot.domain.xid_storm import storm_line

MAX_LABELS = 6
MAX_HOSTS = 20
# labels the card already shows (host, severity, kind) or that only name the scrape
SAID_ELSEWHERE = frozenset({"host", "hostname", "instance", "node", "nodename", "severity",
                            "kind", "job", "alertname", REQUESTED_BY})


def render_alert_card(incident: Incident, *, seq: int = 0, now: float,
                      oncall: str | None = None, can_escalate: bool = True) -> ChatMessage:
    """The message while the incident has no diagnosis yet: a headline from the alert,
    the state line, when and how it fired, and "diagnosing…" while it is."""
    state = incident.state.value
    what = alert_what(incident.host, incident.kind, incident.summary, incident.labels)
    mention = summary.oncall_mention(oncall) if incident.severity.value == "critical" else ""
    title = strings.MSG_HEADLINE_GENERIC.format(host=escape(incident.host), title=what)
    head = f"{mention}*{title}*"
    if len(incident.hosts) > 1:  # a group parent names its hosts, as its full card will
        shown = ", ".join(escape(h) for h in incident.hosts[:MAX_HOSTS])
        n = len(incident.hosts)
        more = f" and {n - MAX_HOSTS} more" if n > MAX_HOSTS else ""
        head += "\n" + strings.MSG_GROUP_HOSTS.format(n=n, hosts=shown, more=more)
    marks = Marks.of(incident)
    sections = [Section(head), Section(summary.state_line(incident, now))]
    sections += [Section(line) for line in status_lines(marks)]
    sections.append(Section(_facts(incident, now)))
    if incident.state is IncidentState.DIAGNOSING:
        sections.append(Section(strings.MSG_ALERT_DIAGNOSING))
    elif incident.state is IncidentState.OPEN:  # waiting for a diagnosis worker
        sections.append(Section(strings.MSG_ALERT_QUEUED))
    return ChatMessage(
        text=strings.MSG_ALERT_NOTIFY.format(mention=mention, host=escape(incident.host),
                                             what=what),
        sections=tuple(sections),
        buttons=incident_buttons(state, incident.id, bool(marks.acked_by),
                                 can_escalate=can_escalate),
        incident_id=incident.id, seq=seq)


def alert_what(host: str, kind: str, summary_text: str, labels: Mapping[str, str]) -> str:
    """What fired, in the alert's own words: its summary (without a leading host name:
    the headline already starts with it), else its name, else the kind."""
    said = summary_text.strip().splitlines()[0] if summary_text.strip() else ""
    asker = labels.get(REQUESTED_BY, "")
    if said == DIAG_SUMMARY and asker:  # a person asked: mention them (a real mention)
        return strings.MSG_ALERT_ASKED.format(what=DIAG_SUMMARY, who=mention(asker))
    for lead in (f"{host}: ", f"{host} "):
        if said.startswith(lead) and said[len(lead):].strip():
            said = said[len(lead):].strip()
            break
    said = said or str(labels.get("alertname") or "")
    return escape(clip(said, 200)) if said else strings.MSG_ALERT_WHAT.format(kind=escape(kind))


def shown_labels(labels: Mapping[str, str]) -> list[str]:
    """The labels that say something the card does not, as ``key=value``, in their order."""
    out = [f"{escape(clip(str(k), 40))}={escape(clip(str(v), 60))}"
           for k, v in labels.items()
           if str(k) not in SAID_ELSEWHERE and not str(k).startswith("__") and str(v)]
    return out[:MAX_LABELS]


def _facts(incident: Incident, now: float) -> str:
    fired = incident.first_seen or now
    times = strings.MSG_ALERT_TIMES.format(n=incident.count) if incident.count > 1 else ""
    text = strings.MSG_ALERT_FACTS.format(
        kind=escape(incident.kind), severity=incident.severity.value,
        when=fmt.clock(fired, now=now), times=times)
    shown = shown_labels(incident.labels)
    if shown:
        text += "\n" + strings.MSG_ALERT_LABELS.format(labels=", ".join(shown))
    if incident.xids:  # an Xid storm folded: its count, since when, and what it may do
        text += "\n" + escape(storm_line(incident.xids, now, held=incident.severity.value
                                          != "critical"))
    return text
