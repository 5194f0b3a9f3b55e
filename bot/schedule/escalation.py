"""Escalation: a critical incident nobody acted on within N minutes is raised, once.

The decision (``due``) is pure. The runner claims ``keys.escalated(id)`` with ``SET NX``
before posting, so two replicas, a retried scheduler slot or a restart never escalate
the same incident twice; if the post fails the claim is released so a later run retries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field, field_validator

from bot.chat.base import ChatBackend, ChatMessage, MessageRef, Section
from bot.chat.text import escape
from bot.config.settings import Settings
from bot.core import fmt, metrics, strings
from bot.core.schema import StrictModel
from bot.domain.incident import IncidentSummary
from bot.domain.lifecycle import IncidentState
from bot.domain.validate import USERGROUP_RE
from storage import keys
from storage.claims import Claims
from storage.stores import Stores

log = logging.getLogger(__name__)

# per state: does a critical incident left in it need a person paged? (why)
ESCALATES: dict[IncidentState, bool] = {
    IncidentState.OPEN: True,  # nobody has seen it; the bot has not even started
    IncidentState.DIAGNOSING: True,  # a diagnosis this old is stuck; the bot cannot finish alone
    # the bot could not reach the host: only a person goes further
    IncidentState.DIAGNOSIS_FAILED: True,
    IncidentState.NO_ACTION: True,  # findings the catalog cannot fix: only a person can act
    IncidentState.AWAITING_APPROVAL: True,  # the fix is ready and waits for an approver
    IncidentState.APPROVED: False,  # a person approved; the bot is about to act
    IncidentState.DENIED: False,  # a person decided, knowingly, not to act
    IncidentState.EXPIRED: True,  # the approval lapsed unanswered: nobody is looking
    IncidentState.REMEDIATING: False,  # the bot is acting on a person's approval
    IncidentState.VERIFIED: False,  # the fix worked and was proven; what remains is routine
    # the approved fix failed: the host is still broken, a person decides
    IncidentState.ACTION_FAILED: True,
    IncidentState.RESUMED: False,  # fixed, and the workload runs again
    IncidentState.SNOOZED: False,  # a person acknowledged it and asked for quiet until a time
    IncidentState.RESOLVED: False,  # closed
}
WAITING_STATES = frozenset(state for state, pages in ESCALATES.items() if pages)
CLAIM_TTL_S = 30 * 86400  # longer than any incident stays open unanswered


class EscalationSettings(StrictModel):
    """``settings.extra["escalation"]``; ``channel`` defaults to ``slack.escalation_channel``."""

    enabled: bool = True
    after_minutes: float = Field(default=15.0, gt=0)
    channel: str = ""
    usergroup: str = ""  # Slack usergroup id (S...), mentioned in the escalation
    # a Slurm node the bot drained, this long with no open incident, is escalated (issue 26)
    drained_max_s: float = Field(default=86400.0, gt=0)

    @field_validator("usergroup")
    @classmethod
    def _usergroup(cls, v: str) -> str:
        if v and not USERGROUP_RE.match(v):
            raise ValueError("must be a Slack usergroup id like S0123ABCD")
        return v


@dataclass(frozen=True)
class EscalationCandidate(IncidentSummary):
    """What the decision needs to know about one incident."""

    acted: bool  # a person approved, denied, acknowledged or acted on it


@dataclass(frozen=True)
class Target:
    """Where an escalation goes: a second channel, or the incident channel with a mention."""

    channel: str
    mention: str = ""  # "<!subteam^S…>" or ""
    in_thread: bool = False  # reply under the original message (no second channel)


class CandidateSource(Protocol):
    def escalation_candidates(self) -> Iterable[EscalationCandidate]: ...


def due(candidates: Iterable[EscalationCandidate], now: float,
        after_s: float) -> list[EscalationCandidate]:
    """Critical, still waiting for a person, nobody acted, older than ``after_s``."""
    return [c for c in candidates
            if c.severity == "critical" and c.state in WAITING_STATES and not c.acted
            and now - c.opened_at >= after_s]


def resolve_target(cfg: EscalationSettings, escalation_channel: str,
                   incident_channel: str, oncall: str = "") -> Target | None:
    """A second channel wins; else a usergroup mention where the incident is; else off.

    The mention is the next group (``escalation.usergroup``), or on-call (``slack.oncall``)
    when no next group is configured: an escalation always pings somebody it can."""
    group = cfg.usergroup or (oncall if USERGROUP_RE.match(oncall or "") else "")
    mention = f"<!subteam^{group}> " if group else ""
    channel = cfg.channel or escalation_channel
    if not cfg.enabled:
        return None
    if channel:
        return Target(channel=channel, mention=mention)
    if mention and incident_channel:
        return Target(channel=incident_channel, mention=mention, in_thread=True)
    return None


def escalation_message(c: EscalationCandidate, now: float, mention: str,
                       link: str | None) -> ChatMessage:
    age = fmt.duration(now - c.opened_at)  # "15 min", as every other message says it
    host, kind = escape(c.host), escape(c.kind)
    text = strings.ESCALATION_TEXT.format(mention=mention, id=escape(c.id), host=host, kind=kind,
                                          age=age)
    context = [strings.ESCALATION_LINK.format(link=escape(link))] if link else []
    return ChatMessage(
        text=text,
        header=strings.ESCALATION_HEADER.format(kind=kind, host=host),
        sections=(Section(text),  # the mention must be in a block to ping
                  Section(strings.ESCALATION_DETAIL.format(state=escape(c.state), age=age))),
        context=tuple(context),
        incident_id=c.id,
    )


def build_escalator(settings: Settings, cfg: EscalationSettings, stores: Stores,
                    chat: ChatBackend,
                    message_ref: Callable[[str], MessageRef | None] | None = None
                    ) -> Escalator | None:
    """The escalation job's runner (None: escalation off or nowhere to go); ``cfg`` is
    ``extra.escalation`` as ``load_sections`` validated it."""
    target = resolve_target(cfg, settings.slack.escalation_channel, settings.slack.channel,
                            settings.slack.oncall)
    if target is None:
        return None
    return Escalator(stores.claims(), chat, StoreCandidates(stores.incidents(), stores.audit()),
                     target, after_s=cfg.after_minutes * 60.0, message_ref=message_ref)


class Escalator:
    """Runs the decision and posts each due incident once (the scheduler calls ``run``)."""

    def __init__(self, claims: Claims, chat: ChatBackend, source: CandidateSource, target: Target,
                 after_s: float, message_ref: Callable[[str], MessageRef | None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.claims, self.chat, self.source, self.target = claims, chat, source, target
        self.after_s = after_s
        self.message_ref = message_ref or (lambda _id: None)
        self.clock = clock

    def run(self, now: float | None = None) -> list[str]:
        """Escalate every due incident not escalated before; return their ids."""
        now = self.clock() if now is None else now
        done: list[str] = []
        for c in due(self.source.escalation_candidates(), now, self.after_s):
            if self._escalate(c, now):
                done.append(c.id)
        return done

    def _escalate(self, c: EscalationCandidate, now: float) -> bool:
        key = keys.escalated(c.id)
        if not self.claims.claim(key, str(now), CLAIM_TTL_S):
            return False
        ref = self.message_ref(c.id)
        link = f"{ref.channel}/{ref.ts}" if ref is not None else None
        try:
            message = escalation_message(c, now, self.target.mention, link)
            thread = ref if self.target.in_thread else None
            self.chat.post(self.target.channel, message, thread=thread)
        except Exception:
            self.claims.unclaim(key)
            log.warning("escalation of %s failed; will retry on the next run", c.id, exc_info=True)
            return False
        metrics.ESCALATIONS.labels(target="usergroup" if self.target.in_thread else "channel").inc()
        log.info("escalated incident %s to %s", c.id, self.target.channel)
        return True


def candidate_from(incident: Any, acted: bool) -> EscalationCandidate:
    """Adapt a stored ``Incident`` (or anything with its fields) to a ``EscalationCandidate``."""
    return EscalationCandidate(
        id=str(incident.id), host=str(incident.host), kind=str(incident.kind),
        severity=str(getattr(incident.severity, "value", incident.severity)),
        state=str(getattr(incident.state, "value", incident.state)),
        opened_at=float(incident.first_seen), acted=acted,
    )


# an unauthorised click (approval.refused) is not somebody taking care of it
OWNERSHIP = ("incident.ack", "ack")  # a named person took it: never paged again
HUMAN_ACTIONS = ("approval.approved", "approval.first_approver", "approval.denied",
                 "incident.retry", "incident.escalate", *OWNERSHIP)


def person_on_it(entries: Iterable[Any], state: str) -> bool:
    """Someone acknowledged it (ever), or a person acted since it entered ``state``: the
    approval of a fix that then failed is not somebody looking at the failure."""
    entries = list(entries)
    since = max((float(e.ts) for e in entries
                 if e.action == "transition" and e.detail.get("to") == state), default=0.0)
    return any(e.action.startswith(OWNERSHIP)
               or (e.action.startswith(HUMAN_ACTIONS) and float(e.ts) >= since)
               for e in entries)


class StoreCandidates:
    """Open incidents (``IncidentStore``) plus whether a person acted (``AuditLog``)."""

    def __init__(self, incidents: Any, audit: Any) -> None:
        self.incidents, self.audit = incidents, audit

    def escalation_candidates(self) -> list[EscalationCandidate]:
        out: list[EscalationCandidate] = []
        for inc in self.incidents.list(open_only=True):
            c = candidate_from(inc, acted=False)
            if c.severity != "critical" or c.state not in WAITING_STATES:
                continue  # skip the audit read for incidents that can never be due
            acted = person_on_it(self.audit.timeline(c.id), c.state)
            out.append(candidate_from(inc, acted=acted))
        return out


# --- issue 29 (deliverable 5): the message offers Escalate only where it can go ---------
def can_escalate(settings: Settings, incident_channel: str) -> bool:
    """Whether escalation has somewhere to go with this config (``extra.escalation``,
    ``slack.escalation_channel``, ``slack.oncall``): what ``Publisher(can_escalate=…)``
    takes, so the message shows no Escalate button that could reach nobody. A bad
    ``extra.escalation`` section counts as nowhere (startup reports it)."""
    raw = settings.extra.get("escalation") or {}
    try:
        cfg = EscalationSettings.model_validate(raw)
    except ValueError:
        return False
    return resolve_target(cfg, settings.slack.escalation_channel, incident_channel,
                          settings.slack.oncall) is not None
