"""The approval desk under fleet policies: the policy that asked for a click says who may
give it (issue 28).

An approval created under a policy carries its name (``action["policy"]``). A click on it
is decided by ``bot/domain/policy.py`` ``approval_policy_for``: the policy's approvers
replace the list for that kind, its ``two_person`` counts too. Everything else (the
atomic claim, the audit, the click event) is the plain ``ApprovalDesk``'s, so the rules
stay in one place; a refusal names the policy and who may approve instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot.chat.interactions import ApprovalDesk, AuditFn, Decision, approver_list
from bot.core import strings
from bot.domain.approval import Approval, ApprovalPolicy, ClaimOutcome, refusal_is_self
from bot.domain.policy import Policy, PolicyDecision, PolicyMode, approval_policy_for
from storage.approvals import ApprovalStore


class PolicyApprovalDesk(ApprovalDesk):
    """``ApprovalDesk`` whose rules per click come from the approval's fleet policy."""

    def __init__(self, *args: Any, fleet: Mapping[str, Policy], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fleet = dict(fleet)

    def approve(self, approval_id: str, user: str) -> Decision:
        desk, policy = self._desk_for(approval_id)
        return self._named(desk.approve(approval_id, user) if desk else
                           super().approve(approval_id, user), policy, user)

    def deny(self, approval_id: str, user: str, reason: str) -> Decision:
        desk, policy = self._desk_for(approval_id)
        return self._named(desk.deny(approval_id, user, reason) if desk else
                           super().deny(approval_id, user, reason), policy, user)

    def check(self, approval_id: str, user: str) -> Decision | None:
        desk, policy = self._desk_for(approval_id)
        found = desk.check(approval_id, user) if desk else super().check(approval_id, user)
        return None if found is None else self._named(found, policy, user)

    def _desk_for(self, approval_id: str) -> tuple[ApprovalDesk | None, Policy | None]:
        """A plain desk with this approval's rules (None: the default rules apply)."""
        if not self.fleet:
            return None, None
        approval = self.store.get(approval_id)
        name = approval.action.policy if approval else ""
        policy = self.fleet.get(name)
        if approval is None or policy is None:
            return None, None
        rules = approval_policy_for(self.policy, policy, approval.kind)
        if rules is self.policy:
            return None, policy
        return ApprovalDesk(self.store, rules, self.events, audit=self._audit_fn,
                            groups=self.groups, clock=self.clock), policy

    def _named(self, decision: Decision, policy: Policy | None, user: str) -> Decision:
        a = decision.approval
        if decision.outcome is not ClaimOutcome.UNAUTHORISED or policy is None or a is None:
            return decision
        rules = approval_policy_for(self.policy, policy, a.kind)
        if refusal_is_self(rules, user, a.requested_by):
            return decision  # the self-approval rule refused it, not the policy
        text = strings.POLICY_REFUSED_CLICK.format(
            kind=a.kind, host=a.action.host or "this host", policy=policy.name,
            who=approver_list(rules, a.kind))
        return replace(decision, text=text)


def policy_actor(decision: PolicyDecision) -> str:
    """Who an automatic approval is recorded as: ``policy:<name>``."""
    return f"policy:{decision.policy_name}"


def claim_for_policy(store: ApprovalStore, approval: Approval, decision: PolicyDecision,
                     now: float, audit: AuditFn | None = None) -> bool:
    """Approve ``approval`` as the policy, atomically, exactly like one click would (the
    same script: a person who clicked first wins). False: leave it to people. A
    two-person approval is never half-approved by a policy."""
    if decision.mode is not PolicyMode.AUTO or decision.policy is None:
        return False
    return claim_as_policy(store, approval, decision.policy_name, decision.reason, now, audit)


def claim_as_policy(store: ApprovalStore, approval: Approval, policy_name: str, reason: str,
                    now: float, audit: AuditFn | None = None) -> bool:
    """The claim itself, as ``policy:<name>``: the flow calls it for an approval whose
    stored policy mode is ``auto``. Never for a two-person approval."""
    if approval.required > 1:
        return False
    actor = f"policy:{policy_name}"
    rules = ApprovalPolicy(approvers=frozenset({actor}), allow_self_approval=True)
    result = store.claim(approval.id, actor, now, rules, (), announce=False)  # the flow acts
    if result.outcome is not ClaimOutcome.CLAIMED:
        return False
    if audit is not None:
        audit(approval.incident_id, actor, "approval.approved",
              {"approval_id": approval.id, "kind": approval.kind, "policy": policy_name,
               "reason": reason, "evidence_hash": approval.evidence_hash})
    return True
