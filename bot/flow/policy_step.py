"""Step 2a: a proposal that a fleet policy runs without a click, and what policies say.

After the diagnosis is posted (``DiagnoseStep.on_opened`` calls ``after_diagnosis``), the
first open approval whose policy decided ``auto`` is
claimed as ``policy:<name>`` through the same atomic claim a click uses (a person who
clicked first wins; a two-person approval is never half-approved by a policy) and handed
to the approve step. Shadow and fallback notes ("would have run…", "limit reached…")
are posted in the thread at once; the "done without a click" note only after the action
verified (``ActStep``), so the thread never claims what did not happen.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.chat.interactions import audit_sink
from bot.chat.policy_desk import claim_as_policy
from bot.domain.approval import Approval
from bot.flow.approve_step import ApproveStep
from bot.flow.message import Publisher
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.incidents import IncidentStore

AUTO = "auto"


def policy_actor(approval: Approval) -> str:
    """Who an automatic approval is recorded as: ``policy:<name>``."""
    return f"policy:{approval.action.policy}"


class PolicyStep:
    """Runs what a policy allows without a click; posts what the policies decided."""

    def __init__(self, incidents: IncidentStore, approvals: ApprovalStore, audit: AuditLog,
                 publisher: Publisher, approve: ApproveStep, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.incidents = incidents
        self.approvals = approvals
        self.audit = audit
        self.publisher = publisher
        self.approve = approve
        self.clock = clock

    def after_diagnosis(self, incident_id: str) -> None:
        open_ = [a for a in self.approvals.for_incident(incident_id) if a.is_open]
        incident = self.incidents.require(incident_id)
        for approval in open_:
            note = approval.action.policy_note
            if note and approval.action.policy_mode != AUTO:
                self.publisher.reply(incident, note)
        auto = next((a for a in open_ if a.action.policy_mode == AUTO), None)
        if auto is not None and self._claim(auto):
            self.approve.on_approved(auto, policy_actor(auto))

    def _claim(self, approval: Approval) -> bool:
        return claim_as_policy(self.approvals, approval, approval.action.policy,
                               "auto", self.clock(), audit_sink(self.audit))
