"""Step 2: a decided approval. Approve: accept at once, act in the background. Deny, expire.

Called by the approval desk only for the one click that won the atomic claim, so the
action runs once however many people (or replicas, or Slack retries) click. Accepting
is quick (one commit through the flow runner: the transition, the running mark; then the
alternatives withdrawn and one re-render that says "Approved by @user · running…"); the
action itself runs in the action executor.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor

from bot.chat.summary import action_phrase
from bot.domain.approval import Approval
from bot.domain.flow import ApprovalClicked, ApprovalDenied, ApprovalExpired
from bot.flow.act_step import ActStep
from bot.flow.runner import FlowRunner
from storage.incidents import UnknownIncident

log = logging.getLogger(__name__)


def said(approval: Approval) -> str:
    """The approved action in the words a person reads (its own), never its kind."""
    return action_phrase(approval.action.proposed())


class ApproveStep:
    """What a final decision on one approval does to its incident."""

    def __init__(self, flow_runner: FlowRunner, act: ActStep, actions: Executor | None = None, *,
                 bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.flow_runner = flow_runner
        self.act = act
        self.actions = actions  # approved actions run here, off the click; None: inline
        self.bot_user = bot_user
        self.clock = clock

    def on_approved(self, approval: Approval, user: str) -> str | None:
        """Accept the claimed approval (message says running), then act off this thread.
        None when it runs; else why nothing ran (the claim won just before the incident
        resolved or moved on), so the desk tells the clicker that, not "running now"."""
        handled = self.flow_runner.handle(approval.incident_id, ApprovalClicked(
            self.clock(), user, approval, said(approval)))
        if handled.refused is not None:
            return handled.refused
        for run in handled.runs:
            if self.actions is None:
                self.act.run_approved(run.approval, run.user)
            else:
                self.actions.submit(self.act.run_approved, run.approval, run.user)
        return None

    def on_denied(self, approval: Approval, user: str, reason: str) -> None:
        self.flow_runner.handle(approval.incident_id, ApprovalDenied(
            self.clock(), user, approval, reason, said(approval)))

    def on_expired(self, approval: Approval) -> None:
        try:
            self.flow_runner.handle(approval.incident_id,
                               ApprovalExpired(self.clock(), self.bot_user, approval))
        except UnknownIncident:
            return
