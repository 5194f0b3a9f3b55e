"""The incident in words a person reads in five seconds: headline, state, ask, evidence.

Pure functions over a ``Diagnosis`` and the incident record; ``bot.chat.render`` calls
them for the parent message (headline, state line, action sentence, buttons), the thread
(one compact evidence table) and the notification text (host, cause, ask). Quantities go
through ``bot.core.fmt``; host text is escaped; no repr or JSON ever reaches the chat.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.chat import cleanup_view
from bot.chat.base import Section
from bot.chat.text import clip, code_safe, escape, in_gib
from bot.core import fmt, strings
from bot.domain import headline as hl
from bot.domain import holding
from bot.domain.action_result import ActionResult, Outcome, Seen
from bot.domain.approval import Approval
from bot.domain.findings import Diagnosis, Finding, ProposedAction
from bot.domain.incident_record import LastOutcome, StepResult
from bot.domain.outcome_word import OUTCOME_STATES as OUTCOME_STATES
from bot.domain.outcome_word import Observed, OutcomeWord, fixes_headline, outcome_word
from bot.domain.validate import USERGROUP_RE
from bot.remediation.actions import find, fixes_of

GB_RE = re.compile(r"(\d) GB\b")  # playbook text says GB for binary gigabytes
STATE_ICON = {
    "open": ":new:", "diagnosing": ":mag:", "diagnosis_failed": ":warning:",
    "no_action": ":white_circle:", "awaiting_approval": ":raising_hand:",
    "approved": ":thumbsup:", "denied": ":no_entry_sign:", "expired": ":hourglass:",
    "remediating": ":gear:", "verified": ":white_check_mark:", "action_failed": ":x:",
    "failed": ":x:", "resumed": ":arrow_forward:", "snoozed": ":zzz:",
    "resolved": ":heavy_check_mark:",
}


class IncidentLike(Protocol):
    """What the summary and the renderer read from an incident (a stored Incident fits)."""

    @property
    def id(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def first_seen(self) -> float: ...


def _val(value: Any) -> str:
    return str(getattr(value, "value", value))


def primary_finding(diagnosis: Diagnosis) -> Finding | None:
    """The finding the headline is about (``bot.domain.headline``'s rule)."""
    index = headline_of(diagnosis).finding
    return None if index is None else diagnosis.findings[index]


def headline_of(diagnosis: Diagnosis) -> hl.Headline:
    return hl.choose(diagnosis, fixes_of)


def _gpus(finding: Finding | None) -> list[Mapping[str, Any]]:
    gpus = finding.evidence.get("gpus") if finding else None
    return [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


gpu_amount = holding.gpu_amount
holder_name = holding.holder_name


def total_held(gpus: Sequence[Mapping[str, Any]]) -> str:
    return fmt.gib(sum(_number(g.get("memory_used_mib")) or 0.0 for g in gpus))


def headline(incident: IncidentLike, diagnosis: Diagnosis, now: float) -> str:
    """What blocks recovery, where: ``gpu-01: GPU 2 (3A:00.0) fell off the bus (Xid 79)``.
    Durations in it are the holder's own (how long it has run), never the incident's age:
    that is on the state line, labelled as the incident's."""
    title = _chat(headline_of(diagnosis).text) if diagnosis.findings else \
        strings.FLOW_NO_FINDINGS
    return strings.MSG_HEADLINE_GENERIC.format(host=escape(incident.host), title=title)


def context_line(diagnosis: Diagnosis) -> str:
    """The line under the headline: the crash or reboot that came before (or "")."""
    return _chat(headline_of(diagnosis).context)


def _chat(text: str) -> str:
    return escape(clip(GB_RE.sub(r"\1 GiB", text.splitlines()[0] if text else ""), 200))


PER_GPU = {"gpu.broken": "are broken", "gpu.wedged": "are wedged", "gpu.degraded": "are degraded"}


def also_found(diagnosis: Diagnosis, *, notes: bool = False) -> list[str]:
    """The findings the headline does not say, once each (warnings and worse; ``notes``:
    the info ones too): per-GPU findings with the same reasons become one line ("GPUs 0–7
    are wedged: process 1312 in D state"), and the verdict count is left out when it only
    restates a GPU headline ("8 GPUs: 8 wedged")."""
    said = set(headline_of(diagnosis).covers)
    gpu_headline = any(diagnosis.findings[i].code.startswith("gpu.") for i in said)
    groups: dict[tuple[str, str], list[Finding]] = {}  # in first-seen order
    order: list[tuple[str, str]] = []
    for i, f in enumerate(diagnosis.findings):
        skipped = f.code in ("boot.previous", "playbook.auto") or (
            _val(f.severity) == "info" and not notes)
        if i in said or skipped:
            continue
        gpu = f.evidence.get("gpu")
        if f.code in PER_GPU and isinstance(gpu, Mapping):
            key = (f.code, "; ".join(map(str, gpu.get("reasons") or [])))
        elif f.code == "gpu.verdicts" and gpu_headline and len(f.evidence.get("counts") or {}) == 1:
            continue
        else:
            key = ("", plain_title(f))
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(f)
    return list(dict.fromkeys(_grouped(k[0], k[1], groups[k]) for k in order))


def _grouped(code: str, why: str, findings: list[Finding]) -> str:
    if not code or len(findings) == 1:
        return plain_title(findings[0])
    indexes = [g.get("index") for f in findings if isinstance(g := f.evidence.get("gpu"), Mapping)]
    shown = index_ranges([i for i in indexes if isinstance(i, int)])
    if any(not isinstance(i, int) for i in indexes):
        shown += (", " if shown else "") + "?"
    return _chat(strings.MSG_GPUS_GROUPED.format(indexes=shown, verdict=PER_GPU[code], why=why))


def index_ranges(indexes: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 5]`` → ``0–3, 5``: runs of GPU indexes as people say them."""
    runs: list[list[int]] = []
    for i in sorted(set(indexes)):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def plain_title(finding: Finding) -> str:
    """A finding's title in chat units (GiB), escaped and kept to one readable line."""
    return _chat(finding.title)


def state_line(incident: IncidentLike, now: float, word: OutcomeWord | None = None) -> str:
    """``:raising_hand: Awaiting approval · incident INC-7 · opened 4 min ago``; once a word
    leads that is not a fix (Done, Reverted, Not fixed, Could not check), the label is that
    word: "Verified" is said only of a fix, never while the problem is there."""
    state = _val(incident.state)
    since = incident.first_seen or now
    icon, label = STATE_ICON.get(state, ":white_circle:"), state.replace("_", " ").capitalize()
    if word in WORD_LABELS and state != "resolved":
        icon, label = WORD_LABELS[word]
    return strings.MSG_STATE_LINE.format(icon=icon, label=label, id=escape(incident.id),
                                         age=fmt.age(now, since))


def action_phrase(action: ProposedAction, diagnosis: Diagnosis | None = None) -> str:
    """The action as a plain verb phrase (never ``kind key=value``): its own words
    (``Action.phrase``), or for a cleanup with a stored preview, the items it deletes."""
    known = find(action.kind)
    if known is not None and known.previewed and diagnosis is not None \
            and cleanup_view.items(diagnosis):
        return cleanup_view.phrase(action, diagnosis)
    p = {k: escape(v) for k, v in action.params.items()}
    try:
        said = known.phrase(p) if known is not None else ""
    except KeyError:
        said = ""
    return said or _generic(action, p)


def in_words(approval: Approval) -> str:
    """An approval's action as a person reads it (its own words), never its kind."""
    return action_phrase(approval.action.proposed())


def is_revert(kind: str) -> bool:
    """An offer that undoes an earlier fix: never a primary button, always a confirm."""
    known = find(kind)
    return known is not None and known.undoes


def _generic(action: ProposedAction, p: Mapping[str, str]) -> str:
    params = ", ".join(f"{k} {v}" for k, v in sorted(p.items())) or "the host"
    return strings.MSG_ACTION_GENERIC.format(kind=escape(action.kind), params=params)


def action_sentence(action: ProposedAction, diagnosis: Diagnosis) -> str:
    """``*Proposed:* stop X and keep it from starting at boot (frees 606.2 GiB). *Risk:* …``;
    the gain is what this action's own target holds, never every GPU's memory."""
    phrase = action_phrase(action, diagnosis)
    gain = action_gain(action, diagnosis)
    if gain:
        phrase += f" ({strings.MSG_FREES.format(mem=gain)})"
    if action.risk:
        risk = escape(action.risk).rstrip(".")
        return strings.MSG_ACTION.format(sentence=_capital(phrase), risk=risk)
    return strings.MSG_ACTION_NO_RISK.format(sentence=_capital(phrase))


def action_done_sentence(action: ProposedAction, diagnosis: Diagnosis) -> str:
    """The approved action's phrase with its gain, no risk (it has run)."""
    gain = action_gain(action, diagnosis)
    phrase = action_phrase(action, diagnosis)
    return phrase + (f" ({strings.MSG_FREES.format(mem=gain)})" if gain else "")


def action_gain(action: ProposedAction, diagnosis: Diagnosis) -> str:
    """GPU memory ``action`` frees: the PID's own for a kill, the unit's GPUs for a stop
    ("" when the evidence cannot say: better no figure than a wrong one)."""
    fixes = fixes_of(action.kind)
    if fixes not in (hl.Fixes.UNIT_HOLDING, hl.Fixes.PID_HOLDING):
        return ""
    hit = hl.fixed_by(action, list(enumerate(diagnosis.findings)), fixes)
    if hit is None:
        return ""
    finding = hit[1]
    if fixes is hl.Fixes.PID_HOLDING:
        holders = finding.evidence.get("holders") or []
        mine = [h for h in holders if isinstance(h, Mapping)
                and str(h.get("pid")) == action.params.get("pid")]
        used = _number(mine[0].get("used_mib")) if mine else None
        if used is not None:
            return fmt.gib(used)
        if len(holders) != 1:
            return ""
    return total_held(_gpus(finding))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def oncall_mention(group: str | None) -> str:
    """A Slack user-group mention (``<!subteam^S0ONCALL>``) for ids that look like one."""
    if group and USERGROUP_RE.match(group):
        return f"<!subteam^{group}> "
    return ""


def notification_text(incident: IncidentLike, diagnosis: Diagnosis,
                      oncall: str | None = None,
                      earlier: Sequence[ProposedAction] = ()) -> str:
    """What a phone shows: host, cause (or, once settled, what was done) and the ask;
    critical incidents @mention on-call. ``earlier``: the approved actions (``outcome``)."""
    mention = oncall_mention(oncall) if _val(incident.severity) == "critical" else ""
    state = _val(incident.state)
    cause = outcome_lead(state, getattr(incident, "last_outcome", None), earlier, diagnosis,
                         tuple(getattr(incident, "results", ()) or ())) or (
        _chat(headline_of(diagnosis).text) if diagnosis.findings else strings.FLOW_NO_FINDINGS)
    if diagnosis.actions and state == "awaiting_approval":
        first = action_phrase(diagnosis.actions[0], diagnosis)
        ask = strings.MSG_ASK_APPROVE.format(sentence=first)
    else:
        ask = strings.MSG_ASK_STATE.format(state=state.replace("_", " "))
    return strings.MSG_NOTIFY.format(mention=mention, host=escape(incident.host),
                                     cause=cause, ask=ask)


def evidence_table(diagnosis: Diagnosis) -> Section | None:
    """The thread's one compact table: per GPU memory, utilisation, PID and unit."""
    finding = primary_finding(diagnosis)
    gpus = _gpus(finding)
    if not gpus:
        return None
    samples = int(_number(gpus[0].get("samples")) or 1)
    rows = [("GPU", "MEMORY", "UTIL", "PID", "UNIT")]
    rows += [_gpu_row(g) for g in gpus]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4]
             for r in rows]
    title = strings.MSG_EVIDENCE_TITLE.format(
        n=len(gpus), s="" if len(gpus) == 1 else "s", samples=samples,
        ss="" if samples == 1 else "s")
    return Section(text=title, code=code_safe("\n".join(line.rstrip() for line in lines)))


def _gpu_row(g: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    """One GPU: what it has in use from every holder (``gpu_used_mib``, where a finding
    keeps its holder's own share apart), of its total."""
    used = _number(g.get("gpu_used_mib", g.get("memory_used_mib")))
    total = _number(g.get("memory_total_mib"))
    mem = f"{fmt.gib(used).removesuffix(' GiB')} / {fmt.gib(total)}"
    util = _number(g.get("utilization_pct", g.get("max_util_pct")))
    holders = g.get("holder")
    first = holders[0] if isinstance(holders, list) and holders else holders
    first = first if isinstance(first, Mapping) else {}
    pid, unit = first.get("pid"), first.get("unit") or first.get("name")
    return (str(g.get("index", "?")), mem, "?" if util is None else f"{util:.0f}%",
            "-" if pid is None else str(pid), clip(str(unit or "-"), 48))


# --- issue 29 (deliverable 5): a message that leads with the outcome ---------------------
_MIB_ASIDE = re.compile(r"\s*\((?:max )?[\d.]+ MiB\)")
# the word the message leads with (``bot.domain.outcome_word``) → its sentence and the
# template of the line under it (the headline as context)
LEADS = {
    OutcomeWord.REVERTED: (strings.MSG_LEAD_REVERTED, strings.MSG_THE_ALERT),
    OutcomeWord.RESUMED: (strings.MSG_LEAD_RESUMED, strings.MSG_WAS),
    OutcomeWord.FIXED: (strings.MSG_LEAD_FIXED, strings.MSG_WAS),
    OutcomeWord.DONE: (strings.MSG_LEAD_DONE, strings.MSG_NOT_FIXED),
    OutcomeWord.NOT_FIXED: (strings.MSG_LEAD_NOT_FIXED, strings.MSG_STILL),
    OutcomeWord.COULD_NOT_CHECK: (strings.MSG_LEAD_COULD_NOT_CHECK, strings.MSG_AS_LAST_SEEN),
}
# the state line's label once a word leads (the state itself is unchanged); Fixed and
# Resumed keep the state's own label, and a resolved incident says Resolved (a decision)
WORD_LABELS = {
    OutcomeWord.DONE: (":ballot_box_with_check:", "Done"),
    OutcomeWord.REVERTED: (":leftwards_arrow_with_hook:", "Reverted"),
    OutcomeWord.NOT_FIXED: (":x:", "Not fixed"),
    OutcomeWord.COULD_NOT_CHECK: (":grey_question:", "Could not check"),
}


def done_phrase(result: ActionResult) -> str:
    """What the verified action did, in words (``X stopped and disabled``); a kind whose
    words depend on what ran (SIGTERM, then SIGKILL) says its own summary's first clause."""
    known = find(result.kind)
    if known is None or not known.words_from_summary:
        said = _done(result.kind, result.params)
        if said:
            return said
    return escape(result.summary.split(";")[0].strip() or result.kind)


def _done(kind: str, params: Mapping[str, str]) -> str:
    known = find(kind)
    try:
        return known.done({k: escape(v) for k, v in params.items()}) if known else ""
    except KeyError:
        return ""


def true_now(result: ActionResult) -> str:
    """What verification saw, in chat units (no MiB aside): ``8/8 GPUs free``."""
    detail = result.verification.detail if result.verification is not None else ""
    return escape(_MIB_ASIDE.sub("", detail).strip())


def _quiet_now(kind: str) -> bool:
    known = find(kind)
    return known is not None and known.quiet_now


def held_now(results: Sequence[StepResult]) -> int | None:
    """GPUs the newest look at them saw holding memory (None: no result looked)."""
    return next((r.held for r in reversed(results) if r.held is not None), None)


def observed(state: str, last: LastOutcome | None, earlier: Sequence[ProposedAction],
             diagnosis: Diagnosis | None, results: Sequence[StepResult] = ()
             ) -> Observed | None:
    """What the outcome word is decided from: the action's facts and what verify saw (a
    step that never ran because the host could not be read: could not check)."""
    if last is None:
        return None
    result = last.result
    if result is None:
        return Observed(state, Seen.COULD_NOT_CHECK) if last.could_not_check else None
    known = find(result.kind)
    undoes = known is not None and known.undoes
    resumes = known is not None and known.resumes
    held = held_now(results)
    fixed = (not undoes and not resumes and result.ok
             and fixes_headline(result, earlier, diagnosis, fixes_of))
    return Observed(state, _seen(result), undoes, resumes, fixed, bool(held))


def _seen(result: ActionResult) -> Seen | None:
    """What its verify observed; an action that lost the host before verify: could not
    check; one refused before it ran: nothing observed (None)."""
    if result.verification is not None:
        return result.verification.seen
    if result.outcome in (Outcome.UNREACHABLE, Outcome.COULD_NOT_CHECK):
        return Seen.COULD_NOT_CHECK
    return None


@dataclass(frozen=True)
class Lead:
    """The settled message's first line and the template of the line under it (the
    headline as context: ``Was: …``, ``Not fixed by this: …``, ``The alert: …``), and the
    word it leads with."""

    text: str
    below: str
    word: OutcomeWord | None = None


def outcome(state: str, last: LastOutcome | None, earlier: Sequence[ProposedAction] = (),
            diagnosis: Diagnosis | None = None, results: Sequence[StepResult] = ()
            ) -> Lead | None:
    """``Fixed: X stopped and disabled; 8/8 GPUs free since 11:02 UTC`` for a verified,
    resumed or resolved incident whose last action verified; ``Not fixed: …`` or ``Could
    not check: …`` for one whose verify saw the condition hold or could not read the host
    (None otherwise: the headline still leads). ``earlier``: the approved actions before
    it that were not undone (a lasting fix after the stop names both). "Fixed" only when it
    fixed what the headline names, else "Done". The time is when the action finished,
    never the render's clock; after a drop-in (whose verification is about a file) what
    is true now is the newest earlier action's, from ``results``."""
    word = outcome_word(observed(state, last, earlier, diagnosis, results))
    if last is None or word is None or word not in LEADS:
        return None
    label, below = LEADS[word]
    result = last.result
    if result is None or word in (OutcomeWord.NOT_FIXED, OutcomeWord.COULD_NOT_CHECK):
        said = escape(in_gib(_MIB_ASIDE.sub("", result.summary if result else last.summary)))
        if word is OutcomeWord.NOT_FIXED and result is not None and is_revert(result.kind):
            label = strings.MSG_LEAD_REVERT_FAILED
        return Lead(label.format(done=said), below, word)
    parts = [done_phrase(result)]
    if word is not OutcomeWord.REVERTED:
        before = [_done(a.kind, a.params) for a in earlier
                  if (a.kind, a.params) != (result.kind, result.params)
                  and not is_revert(a.kind)]
        parts = [p for p in before if p] + parts
    lead = label.format(done="; ".join(dict.fromkeys(parts)))
    now, done_at = _now_and_when(result, results)
    if word is OutcomeWord.REVERTED and now:
        held = held_now(results)
        if held is not None:
            now = (strings.MSG_REVERT_BACK if held else strings.MSG_REVERT_NOT_BACK).format(
                now=now)
    if not now or not done_at:
        return Lead(lead + (f"; {now}" if now else ""), below, word)
    # "since" belongs to what the action made true, not to what verify saw beside it
    # ("8/8 GPUs free of it since 10:02 UTC; still holding GPUs, not this action's …")
    first, _, aside = now.partition("; ")
    text = strings.MSG_LEAD_NOW.format(lead=lead, now=first, when=fmt.clock(done_at, now=done_at))
    return Lead(text + (f"; {aside}" if aside else ""), below, word)


def _now_and_when(result: ActionResult, results: Sequence[StepResult]) -> tuple[str, float]:
    """What is true now and since when: the action's own verification, or for a drop-in
    the newest earlier verified action's (a drop-in's detail is its file, not the GPUs)."""
    if not _quiet_now(result.kind):
        at = result.started_at + result.duration_s if result.started_at else 0.0
        return true_now(result), at
    for r in reversed(results):
        if r.ok and r.kind and not _quiet_now(r.kind) and r.now:
            return escape(_MIB_ASIDE.sub("", r.now).strip()), r.at
    return "", 0.0


def outcome_lead(state: str, last: LastOutcome | None,
                 earlier: Sequence[ProposedAction] = (),
                 diagnosis: Diagnosis | None = None,
                 results: Sequence[StepResult] = ()) -> str:
    """``outcome``'s first line, or "" while the headline leads."""
    lead = outcome(state, last, earlier, diagnosis, results)
    return lead.text if lead is not None else ""
