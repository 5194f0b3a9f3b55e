"""A click is checked against the message it came from (issue 39).

A button's value names an approval (Approve, Deny, Revert) or an incident (Ack, Resolve,
Snooze, Retry, Escalate). Slack signs the request, but the value alone says nothing about
which message carried it: a click from an old message whose incident number was handed
out again after Redis lost its data, or a value edited into a copied payload, would act on
whatever now bears that id. So every click that changes something is held against where
that approval's or incident's buttons were posted: the approval's own message
(``Approval.channel``/``message_ts``, kept when its card is delivered), else its incident's
message (``Incident.chat``), or the table of the storm the incident was placed in (issue
37: its rows carry the same Approve and Retry). Nothing recorded yet (a card still on its
way): nothing to hold it against, and the desk's own rules decide. A mismatch is refused,
audited, and the clicker told which incident the button belongs to.
"""

from __future__ import annotations

from bot.chat.interactions import AuditFn
from bot.chat.outbox import STORM_TABLE
from bot.core import strings
from bot.domain.approval import Approval
from storage.approvals import ApprovalStore
from storage.chat_outbox import ChatOutboxStore
from storage.incidents import IncidentStore
from storage.storms import StormStore


class MessageCheck:
    """Where each approval's and incident's buttons live, read from Redis per click."""

    def __init__(self, approvals: ApprovalStore, incidents: IncidentStore,
                 audit: AuditFn | None = None, storms: StormStore | None = None,
                 outbox: ChatOutboxStore | None = None) -> None:
        self.approvals = approvals
        self.incidents = incidents
        self.audit = audit
        self.storms, self.outbox = storms, outbox

    def approval(self, approval_id: str, user: str, channel: str, ts: str) -> str | None:
        """None when a click on approval ``approval_id`` from (``channel``, ``ts``) may go
        on to the desk; else the refusal for the clicker (audited)."""
        approval = self.approvals.get(approval_id)
        if approval is None:
            return None  # the desk answers "not found" with its own words
        posted = _posted(approval) or self._incident_message(approval.incident_id)
        if posted is None or posted == (channel, ts) or \
                self._storm_message(approval.incident_id) == (channel, ts):
            return None
        return self._refuse(approval.incident_id, user, channel, ts,
                            {"approval_id": approval.id, "kind": approval.kind})

    def incident(self, incident_id: str, user: str, channel: str, ts: str) -> str | None:
        """The same for an incident's own buttons (its message, or a grouped host's)."""
        posted = self._incident_message(incident_id)
        if posted is None or posted == (channel, ts) or \
                self._storm_message(incident_id) == (channel, ts):
            return None
        return self._refuse(incident_id, user, channel, ts, {})

    def _incident_message(self, incident_id: str) -> tuple[str, str] | None:
        incident = self.incidents.get(incident_id)
        if incident is None or incident.chat is None:
            return None
        return incident.chat.channel, incident.chat.ts

    def _storm_message(self, incident_id: str) -> tuple[str, str] | None:
        """The table of the storm the incident was placed in, once it is posted."""
        if self.storms is None or self.outbox is None:
            return None
        storm = self.storms.storm_of(incident_id)
        table = self.outbox.posted(storm).get(STORM_TABLE) if storm is not None else None
        return (table.channel, table.ts) if table is not None else None

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
