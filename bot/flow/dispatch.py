"""The flow's side of the approval desk: what happens once a decision is final.

Built from the flow's steps before the chat app, and handed to it: no late binding.
"""

from __future__ import annotations

from bot.chat.interactions import ApprovalCallbacks
from bot.domain.approval import Approval
from bot.flow.approve_step import ApproveStep
from bot.flow.decide_step import DecideStep, Verb


class FlowCallbacks:
    """``ApprovalCallbacks`` bound to the approve and decide steps."""

    def __init__(self, approve: ApproveStep, decide: DecideStep) -> None:
        self.approve = approve
        self.decide = decide

    def approved(self, approval: Approval, user: str) -> str | None:
        """None when the action runs; else why nothing ran (said to the clicker)."""
        return self.approve.on_approved(approval, user)

    def denied(self, approval: Approval, user: str, reason: str) -> None:
        self.approve.on_denied(approval, user, reason)

    def expired(self, approval: Approval) -> None:
        self.approve.on_expired(approval)

    def incident(self, verb: str, incident_id: str, user: str, duration_s: int) -> str:
        return self.decide.decide(Verb(verb), incident_id, user, duration_s)

    def callbacks(self) -> ApprovalCallbacks:
        return ApprovalCallbacks(on_approved=self.approved, on_denied=self.denied,
                                 on_expired=self.expired, on_incident=self.incident)
