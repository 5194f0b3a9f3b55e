"""The flow's side of the approval desk: what happens once a decision is final.

Built from the flow context before the chat app, and handed to it: no late binding.
"""

from __future__ import annotations

from bot.chat.interactions import ApprovalCallbacks
from bot.domain.approval import Approval
from bot.flow import approve_step, decide_step
from bot.flow.context import FlowContext


class FlowCallbacks:
    """``ApprovalCallbacks`` bound to one flow context."""

    def __init__(self, ctx: FlowContext) -> None:
        self.ctx = ctx

    def approved(self, approval: Approval, user: str) -> None:
        approve_step.on_approved(self.ctx, approval, user)

    def denied(self, approval: Approval, user: str, reason: str) -> None:
        approve_step.on_denied(self.ctx, approval, user, reason)

    def expired(self, approval: Approval) -> None:
        approve_step.on_expired(self.ctx, approval)

    def incident(self, verb: str, incident_id: str, user: str, duration_s: int) -> str:
        return decide_step.decide(self.ctx, decide_step.Verb(verb), incident_id, user, duration_s)

    def callbacks(self) -> ApprovalCallbacks:
        return ApprovalCallbacks(on_approved=self.approved, on_denied=self.denied,
                                 on_expired=self.expired, on_incident=self.incident)
