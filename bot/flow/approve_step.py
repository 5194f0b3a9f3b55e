"""Step 2: a decided approval. Approve: accept at once, act in the background. Deny, expire.

Called by the approval desk only for the one click that won the atomic claim, so the
action runs once however many people (or replicas, or Slack retries) click. Accepting
is quick (a transition, withdrawing the alternatives, one re-render that says
"Approved by @user · running…"); the action itself runs in the action executor.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import replace

from bot.chat.text import escape, mention
from bot.core import strings
from bot.domain.approval import Approval
from bot.domain.incident import Incident
from bot.domain.incident_record import Running
from bot.domain.lifecycle import IllegalTransition, IncidentState
from bot.flow.act_step import ActStep
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from storage.audit import AuditLog
from storage.incidents import IncidentStore

log = logging.getLogger(__name__)
# a click on a button of a denied, expired, resolved or busy incident runs nothing
ACTABLE = {IncidentState.AWAITING_APPROVAL, IncidentState.VERIFIED, IncidentState.ACTION_FAILED,
           IncidentState.RESUMED}


class ApproveStep:
    """What a final decision on one approval does to its incident."""

    def __init__(self, incidents: IncidentStore, plans: Plans, publisher: Publisher,
                 act: ActStep, audit: AuditLog, actions: Executor | None = None, *,
                 bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.incidents = incidents
        self.plans = plans
        self.publisher = publisher
        self.act = act
        self.audit = audit
        self.actions = actions  # approved actions run here, off the click; None: inline
        self.bot_user = bot_user
        self.clock = clock

    def on_approved(self, approval: Approval, user: str) -> str | None:
        """Accept the claimed approval (message says running), then act off this thread.
        None when it runs; else why nothing ran (the claim won just before the incident
        resolved or moved on), so the desk tells the clicker that, not "running now"."""
        incident = self.incidents.require(approval.incident_id)
        kind = approval.action["kind"]
        if incident.state not in ACTABLE or incident.running is not None:
            return self._skip(incident, user, strings.FLOW_NOT_ACTABLE.format(
                kind=kind, id=incident.id, state=incident.state.value))
        if incident.state is IncidentState.AWAITING_APPROVAL:
            try:
                self.incidents.transition(incident.id, IncidentState.APPROVED, user,
                                          f"approved {kind}", approval.evidence_hash)
            except IllegalTransition:  # another alternative, or a resolve, won by a hair
                now = self.incidents.require(incident.id).state
                return self._skip(incident, user, strings.FLOW_NOT_ACTABLE.format(
                    kind=kind, id=incident.id, state=now.value))
            self.plans.withdraw_pending(incident, user, keep=approval.id)
        running = Running(kind, user, self.clock(), approval.id)
        self.incidents.update(incident.id, lambda i: replace(i, running=running))
        self.publisher.publish(incident.id)
        if self.actions is None:
            self.act.run_approved(approval, user)
        else:
            self.actions.submit(self.act.run_approved, approval, user)
        return None

    def _skip(self, incident: Incident, user: str, text: str) -> str:
        self.audit.append(incident.id, user, "action.skipped", {"reason": text[:500]})
        self.publisher.reply(incident, text)
        return text

    def on_denied(self, approval: Approval, user: str, reason: str) -> None:
        incident = self.incidents.require(approval.incident_id)
        if incident.state is IncidentState.AWAITING_APPROVAL:
            self.incidents.transition(incident.id, IncidentState.DENIED, user, reason or "denied")
            self.plans.withdraw_pending(incident, user, reason=f"denied {approval.kind}")
        self.publisher.reply(incident, strings.FLOW_DENIED.format(  # a mention: <@U…>
            user=mention(user), kind=approval.action["kind"], reason=escape(reason or "-")))
        self.publisher.publish(incident.id)

    def on_expired(self, approval: Approval) -> None:
        incident = self.incidents.get(approval.incident_id)
        if incident is None:
            return
        if incident.state is IncidentState.AWAITING_APPROVAL:
            self.incidents.transition(incident.id, IncidentState.EXPIRED, self.bot_user,
                                      "approval expired")
            self.plans.withdraw_pending(incident, self.bot_user, reason="approval expired")
        self.publisher.publish(incident.id)
