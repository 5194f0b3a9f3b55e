"""A click is checked against the message it came from (issue 39).

A button's value names an approval (Approve, Deny, Revert) or an incident (Ack, Resolve,
Snooze, Retry, Escalate). Slack signs the request, but the value alone says nothing about
which message carried it: a click from an old message whose incident number was handed
out again after Redis lost its data, or a value edited into a copied payload, would act on
whatever now bears that id. So every click that changes something is held against where
that approval's or incident's buttons were posted: the approval's own message
(``Approval.channel``/``message_ts``, kept when its card is delivered), else its incident's
message (``Incident.chat``). Nothing recorded yet (a card still on its way): nothing to
hold it against, and the desk's own rules decide. A mismatch is refused, audited, and the
clicker told which incident the button belongs to.
"""

from __future__ import annotations

from bot.chat.interactions import AuditFn
from bot.core import strings
from bot.domain.approval import Approval
from storage.approvals import ApprovalStore
from storage.incidents import IncidentStore


class MessageCheck:
    """Where each approval's and incident's buttons live, read from Redis per click."""

    def __init__(self, approvals: ApprovalStore, incidents: IncidentStore,
                 audit: AuditFn | None = None) -> None:
        self.approvals = approvals
        self.incidents = incidents
        self.audit = audit

    def approval(self, approval_id: str, user: str, channel: str, ts: str) -> str | None:
        """None when a click on approval ``approval_id`` from (``channel``, ``ts``) may go
        on to the desk; else the refusal for the clicker (audited)."""
        approval = self.approvals.get(approval_id)
        if approval is None:
            return None  # the desk answers "not found" with its own words
        posted = _posted(approval) or self._incident_message(approval.incident_id)
        if posted is None or posted == (channel, ts):
            return None
        return self._refuse(approval.incident_id, user, channel, ts,
                            {"approval_id": approval.id, "kind": approval.kind})

    def incident(self, incident_id: str, user: str, channel: str, ts: str) -> str | None:
        """The same for an incident's own buttons (its message, or a grouped host's)."""
        posted = self._incident_message(incident_id)
        if posted is None or posted == (channel, ts):
            return None
        return self._refuse(incident_id, user, channel, ts, {})

    def _incident_message(self, incident_id: str) -> tuple[str, str] | None:
        incident = self.incidents.get(incident_id)
        if incident is None or incident.chat is None:
            return None
        return incident.chat.channel, incident.chat.ts

    def _refuse(self, incident_id: str, user: str, channel: str, ts: str,
                detail: dict[str, str]) -> str:
        if self.audit is not None:
            self.audit(incident_id, user or "unknown user", "click.refused",
                       {"reason": "the click came from another message", "channel": channel,
                        "ts": ts, **detail})
        return strings.CLICK_OTHER_MESSAGE.format(id=incident_id)


def _posted(approval: Approval) -> tuple[str, str] | None:
    if approval.channel and approval.message_ts:
        return approval.channel, approval.message_ts
    return None
