"""The approval desk: one click → one atomic claim → at most one event, any backend.

Slack buttons and terminal commands both end here, so the rules (who may approve,
two-person, expiry, exactly once) are enforced in one place. Every refusal and every
decision is audited; the reply text for the clicking person comes from ``bot.core.strings``.

The desk never calls the flow (issue 34): a decision made final goes on the incident
events stream as a click event, in the claim's own script (``storage.approvals``), and the
flow's consumer acts on it as it does on alerts. The clicker's reply is what the desk
knows at the claim ("Approved by … — running now"); what only the flow can know (the
incident moved on, an incident verb's outcome) the flow says afterwards.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bot.chat.approver_names import approver_list, utc_minute
from bot.chat.summary import in_words
from bot.chat.text import escape, mention, mentions
from bot.core import metrics, strings
from bot.core.errors import log_internal
from bot.domain.approval import (
    Approval,
    ApprovalPolicy,
    ClaimOutcome,
    Resolver,
    may_decide,
    refusal_is_self,
)
from storage.approvals import ApprovalStore, ClaimResult
from storage.connection import refusal
from storage.events import IncidentEvents

log = logging.getLogger(__name__)

# (incident_id, actor, action, detail): ``AuditLog(redis).append`` fits; see ``audit_sink``
AuditFn = Callable[[str, str, str, dict[str, Any]], object]
O = ClaimOutcome  # noqa: E741 - short alias keeps the outcome tables readable


class GroupResolver(Protocol):
    def groups_of(self, user: str, groups: frozenset[str]) -> frozenset[str]:
        """Which of ``groups`` (usergroup ids) ``user`` belongs to."""
        ...


class StaticGroups:
    """Group membership from a mapping (terminal demo, tests)."""

    def __init__(
        self, members: Mapping[str, frozenset[str] | set[str] | list[str]] | None = None
    ) -> None:
        self.members = {g: frozenset(m) for g, m in (members or {}).items()}

    def groups_of(self, user: str, groups: frozenset[str]) -> frozenset[str]:
        return frozenset(g for g in groups if user in self.members.get(g, frozenset()))


@dataclass(frozen=True)
class Decision:
    outcome: ClaimOutcome
    approval: Approval | None
    text: str  # the reply to the person who clicked (ephemeral in Slack)
    mark: str = ""  # a note that replaces this approval's buttons on the message ("" → keep)
    acted: bool = False  # this call made the decision final: its click event is queued


class ApprovalDesk:
    def __init__(
        self,
        store: ApprovalStore,
        policy: ApprovalPolicy,
        events: IncidentEvents,
        audit: AuditFn | None = None,
        groups: GroupResolver | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store, self.policy, self.events = store, policy, events
        self._audit_fn, self.groups, self.clock = audit, groups or StaticGroups(), clock

    def approve(self, approval_id: str, user: str) -> Decision:
        """Record a click on Approve (or Revert). The claim that won (or the expiry this
        click found) queued its click event in the same script: the flow runs it."""
        result = self.store.claim(approval_id, user, self.clock(), self.policy, self._groups(user))
        self._audit_result(result, user, "approve", "")
        return self._decision(result, user, acted=result.outcome is O.CLAIMED)

    def incident(self, verb: str, incident_id: str, user: str, duration_s: int = 0, *,
                 channel: str = "") -> str:
        """An incident-level decision (Ack, Resolve, Snooze, Retry, Escalate) by ``user``:
        the refusal now if they may not; else queued as a click event and "" returned, for
        the flow answers (privately, in ``channel`` or the incident's) once it applied it."""
        if (refused := self.refusal(verb, user, incident_id)) is not None:
            return refused
        self.events.click(verb, incident_id, user, duration_s=duration_s, channel=channel)
        return ""

    def refusal(self, verb: str, user: str, incident_id: str = "",
                detail: Mapping[str, Any] | None = None) -> str | None:
        """The one rule for chat changes other than approvals (incident buttons, ``/ir ack|
        resolve|snooze|silence``): None if ``user`` may ``verb``, else the private reply;
        every refusal audited (a request without a user as "unknown user")."""
        kind = f"incident.{verb}"
        if may_decide(self.policy, kind, user, self._groups(user), ""):
            return None
        self._audit(incident_id, user, "incident.refused", {"verb": verb, **(detail or {})})
        if not user:
            return strings.UNKNOWN_USER_REFUSED
        who = approver_list(self.policy, kind)
        if verb == "diag":
            return strings.DIAG_NOT_ALLOWED.format(host=(detail or {}).get("host", "?"), who=who)
        return strings.INCIDENT_NOT_ALLOWED.format(verb=verb, who=who)

    def check(self, approval_id: str, user: str) -> Decision | None:
        """Before the deny modal opens: None if ``user`` may deny now, else the refusal."""
        current = self.store.get(approval_id)
        if current is None:
            return self._decision(ClaimResult(O.NOT_FOUND, None), user)
        if not may_decide(
            self.policy, current.kind, user, self._groups(user), current.requested_by
        ):
            result = ClaimResult(O.UNAUTHORISED, current)
            self._audit_result(result, user, "deny", "")
            return self._decision(result, user)
        if current.status == "cancelled":
            result = ClaimResult(O.CANCELLED, current)
            self._audit_result(result, user, "deny", "")
            return self._decision(result, user)
        if not current.is_open:
            done = O.DENIED if current.status == "denied" else O.ALREADY_DONE
            return self._decision(
                ClaimResult(O.EXPIRED if current.status == "expired" else done, current), user
            )
        if self.clock() >= current.expires_at:
            return self._decision(ClaimResult(O.EXPIRED, current), user)
        return None

    def deny(self, approval_id: str, user: str, reason: str) -> Decision:
        result = self.store.deny(
            approval_id, user, reason, self.clock(), self.policy, self._groups(user)
        )
        self._audit_result(result, user, "deny", reason)
        return self._decision(result, user,
                              acted=result.outcome is O.DENIED and result.changed)

    def expire_due(self) -> list[Approval]:
        """Scheduler hook: expire overdue approvals, each audited as the bot's and queued as
        ``click.expired`` for the flow by the same script."""
        return self.store.expire_due(self.clock(), actor="bot")

    def _groups(self, user: str) -> frozenset[str]:
        wanted = self.policy.all_groups()
        if not wanted:
            return frozenset()
        try:
            return self.groups.groups_of(user, wanted)
        except Exception as exc:  # fail closed: no groups means fewer rights
            log.warning("usergroup lookup failed for %s: %s", user, exc)
            return frozenset()

    def _decision(self, result: ClaimResult, user: str, *, acted: bool = False) -> Decision:
        return Decision(
            result.outcome,
            result.approval,
            reply_text(result, user, self.policy),
            mark_text(result),
            acted,
        )

    def _audit_result(self, result: ClaimResult, user: str, verb: str, reason: str) -> None:
        a = result.approval
        if a is None:
            log.warning("%s click by %s on an unknown approval", verb, user)
            return
        action = _AUDIT_ACTION.get((verb, result.outcome, result.changed))
        metrics.APPROVALS.labels(outcome=result.outcome.value).inc()
        if action is not None:
            detail: dict[str, Any] = {
                "approval_id": a.id,
                "kind": a.kind,
                "evidence_hash": a.evidence_hash,
            }
            if reason:
                detail["reason"] = reason
            if result.outcome is O.CANCELLED:
                detail.update(self._withdrawn(a, result.changed))
            self._audit(a.incident_id, user, action, detail)

    def _withdrawn(self, a: Approval, now: bool) -> dict[str, str]:
        """A late click's audit detail: why it ran nothing. ``now``: this click withdrew it
        (a pending approval of a resolved incident), audited as the resolver's withdrawal."""
        why = {"withdrawn": a.reason, "withdrawn_by": a.decided_by,
               "resolved_by": a.resolved_by.value if a.resolved_by else ""}
        if now:
            self._audit(a.incident_id, a.decided_by, "approval.cancelled", {
                "approval_id": a.id, "kind": a.kind, "reason": a.reason,
                "resolved_by": why["resolved_by"]})
        return why

    def _audit(self, incident_id: str, actor: str, action: str, detail: dict[str, Any]) -> None:
        if self._audit_fn is None:
            return
        try:
            self._audit_fn(incident_id, actor or strings.AUDIT_UNKNOWN_USER, action, detail)
        except Exception as exc:  # an audit outage is logged loudly, never silent
            if (why := refusal(exc)) is None:
                log_internal(exc, "audit")
                return
            # Redis said "not now" (stopped, out of memory…): not a bug of ours, but the
            # entry is lost, so it is said with what it was (issue 39's chaos run)
            metrics.refused(why, "audit")
            log.warning("audit entry lost, Redis refused (%s): %s %s by %s %s: %s", why,
                        incident_id, action, actor, detail, exc)


# what a click's result audits here; the results that hand the flow a click event
# (approve: claimed, expired; deny: denied, expired; each ``changed``) are audited by the
# claim's own script, before the flow can act on them (``storage/approval_scripts.py``)
_AUDIT_ACTION: dict[tuple[str, ClaimOutcome, bool], str] = {
    ("approve", O.NEED_SECOND_APPROVER, True): "approval.first_approver",
    ("approve", O.UNAUTHORISED, False): "approval.refused",
    ("approve", O.EXPIRED, False): "approval.expired_click",
    ("deny", O.UNAUTHORISED, False): "approval.refused",
    # a click on an approval withdrawn before it (its incident resolved, or another chosen)
    ("approve", O.CANCELLED, False): "approval.withdrawn_click",
    ("deny", O.CANCELLED, False): "approval.withdrawn_click",
    # the click found its incident resolved after the approval was created: withdrawn now
    ("approve", O.CANCELLED, True): "approval.withdrawn_click",
    ("deny", O.CANCELLED, True): "approval.withdrawn_click",
}


def reply_text(result: ClaimResult, user: str, policy: ApprovalPolicy) -> str:
    """The ephemeral answer for one click (pure)."""
    a = result.approval
    if a is None:
        return strings.APPROVAL_NOT_FOUND
    match result.outcome:
        case O.UNAUTHORISED:
            if refusal_is_self(policy, user, a.requested_by):
                return strings.APPROVAL_REFUSED_SELF
            return strings.APPROVAL_REFUSED.format(kind=in_words(a),
                                                 who=approver_list(policy, a.kind))
        case O.EXPIRED:
            return strings.APPROVAL_EXPIRED.format(when=utc_minute(a.expires_at))
        case O.ALREADY_DONE:
            who = mentions(a.approvers) if a.status == "approved" else mentions([a.decided_by])
            return strings.APPROVAL_ALREADY_DONE.format(status=a.status.value, who=who)
        case O.DENIED:
            if result.changed:
                return strings.APPROVAL_DENIED_OK.format(kind=in_words(a), reason=escape(a.reason))
            return strings.APPROVAL_WAS_DENIED.format(
                who=mentions([a.decided_by]), reason=escape(a.reason)
            )
        case O.NEED_SECOND_APPROVER:
            if result.changed:
                return strings.APPROVAL_NEED_SECOND.format(have=len(a.approvers), need=a.required)
            return strings.APPROVAL_SAME_PERSON
        case O.CLAIMED:
            return strings.APPROVAL_GRANTED.format(who=mention(user), kind=in_words(a))
        case O.CANCELLED:
            if a.resolved_by is not None:
                return strings.APPROVAL_AFTER_RESOLVE.format(
                    id=a.incident_id, when=_clock_time(a.decided_at), by=_resolver(a))
            return strings.APPROVAL_WITHDRAWN.format(reason=escape(a.reason))
    return strings.APPROVAL_NOT_FOUND


def _resolver(a: Approval) -> str:
    """"the alert", "the bot" or the person who resolved the incident."""
    match a.resolved_by:
        case Resolver.ALERT:
            return strings.RESOLVED_BY_ALERT
        case Resolver.PERSON:
            return mention(a.decided_by)
    return strings.RESOLVED_BY_BOT


def _clock_time(ts: float) -> str:
    """"11:02" today (UTC), the date too for older ones."""
    if time.strftime("%Y-%m-%d", time.gmtime(ts)) == time.strftime("%Y-%m-%d", time.gmtime()):
        return time.strftime("%H:%M", time.gmtime(ts))
    return utc_minute(ts)


def mark_text(result: ClaimResult) -> str:
    """The note replacing buttons once an approval is final (empty while it is open)."""
    a = result.approval
    if a is None:
        return ""
    if result.outcome is O.EXPIRED:
        return strings.APPROVAL_MARK_EXPIRED.format(when=utc_minute(a.expires_at))
    if result.outcome is O.DENIED:
        return strings.APPROVAL_MARK_DENIED.format(
            who=mentions([a.decided_by]), reason=escape(a.reason)
        )
    if result.outcome is O.CLAIMED:
        return strings.APPROVAL_MARK_APPROVED.format(who=mentions(a.approvers))
    return ""


def audit_sink(audit_log: Any) -> AuditFn:
    """Adapt ``storage.audit.AuditLog``: entries without an incident go to the global stream."""

    def sink(incident_id: str, actor: str, action: str, detail: dict[str, Any]) -> object:
        if incident_id:
            return audit_log.append(incident_id, actor, action, detail)
        return audit_log.append_global(actor, action, detail)

    return sink
