"""Step 2: a decided approval. Approve: accept at once, act in the background. Deny, expire.

Called by the approval desk only for the one click that won the atomic claim, so the
action runs once however many people (or replicas, or Slack retries) click. Accepting
is quick (a transition, withdrawing the alternatives, one re-render that says
"Approved by @user · running…"); the action itself runs in the action executor.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from bot.core import strings
from bot.domain.approval import Approval
from bot.domain.incident import Incident
from bot.domain.incident_record import Running
from bot.domain.lifecycle import IllegalTransition, IncidentState
from bot.flow.act_step import run_approved
from bot.flow.context import FlowContext
from bot.flow.message import publish
from bot.flow.plans import withdraw_pending
from bot.flow.thread import post_in_thread

log = logging.getLogger(__name__)
# a click on a button of a denied, expired, resolved or busy incident runs nothing
ACTABLE = {IncidentState.AWAITING_APPROVAL, IncidentState.VERIFIED, IncidentState.ACTION_FAILED,
           IncidentState.RESUMED}


def on_approved(ctx: FlowContext, approval: Approval, user: str) -> None:
    """Accept the claimed approval (message says running), then act off this thread."""
    incident = ctx.incidents.require(approval.incident_id)
    kind = approval.action["kind"]
    if incident.state not in ACTABLE or incident.running is not None:
        _skip(ctx, incident, user, strings.FLOW_NOT_ACTABLE.format(
            kind=kind, id=incident.id, state=incident.state.value))
        return
    if incident.state is IncidentState.AWAITING_APPROVAL:
        try:
            ctx.incidents.transition(incident.id, IncidentState.APPROVED, user, f"approved {kind}",
                                     approval.evidence_hash)
        except IllegalTransition:  # another alternative won the race by a hair
            _skip(ctx, incident, user, strings.FLOW_NOT_ACTABLE.format(
                kind=kind, id=incident.id, state=IncidentState.APPROVED.value))
            return
        withdraw_pending(ctx, incident, user, keep=approval.id)
    running = Running(kind, user, ctx.clock(), approval.id)
    ctx.incidents.update(incident.id, lambda i: replace(i, running=running))
    publish(ctx, incident.id)
    ctx.run_off_thread(run_approved, ctx, approval, user)


def _skip(ctx: FlowContext, incident: Incident, user: str, text: str) -> None:
    ctx.audit.append(incident.id, user, "action.skipped", {"reason": text[:500]})
    post_in_thread(ctx, incident, text)


def on_denied(ctx: FlowContext, approval: Approval, user: str, reason: str) -> None:
    incident = ctx.incidents.require(approval.incident_id)
    if incident.state is IncidentState.AWAITING_APPROVAL:
        ctx.incidents.transition(incident.id, IncidentState.DENIED, user, reason or "denied")
        withdraw_pending(ctx, incident, user, reason=f"denied {approval.kind}")
    post_in_thread(ctx, incident, strings.FLOW_DENIED.format(
        user=user, kind=approval.action["kind"], reason=reason or "-"))
    publish(ctx, incident.id)


def on_expired(ctx: FlowContext, approval: Approval) -> None:
    incident = ctx.incidents.get(approval.incident_id)
    if incident is None:
        return
    if incident.state is IncidentState.AWAITING_APPROVAL:
        ctx.incidents.transition(incident.id, IncidentState.EXPIRED, ctx.bot_user,
                                 "approval expired")
        withdraw_pending(ctx, incident, ctx.bot_user, reason="approval expired")
    publish(ctx, incident.id)
