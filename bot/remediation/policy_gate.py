"""The one callable the flow asks before it offers a button: does a policy run this alone?

``evaluate`` is read-only (which policy, and whether a window or the open breaker already
says "ask"); it is safe for rendering and for ``policy check``. ``commit`` is the step
that takes a slot: for ``auto`` it counts the host atomically across replicas
(``storage/policy_limits.py``) and falls back to ``approve`` with the reason when the
limit or the breaker says so. Every committed decision is audited with the policy's
name, so "why did the bot do this without me" has an answer in the timeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.config.policy import fleet_limits_from_settings, policies_from_settings
from bot.config.settings import Settings
from bot.core import strings
from bot.domain.approval import ApprovalPolicy
from bot.domain.policy import (
    ActionLike,
    BreakerState,
    FleetLimits,
    Policy,
    PolicyDecision,
    PolicyMode,
    approval_policy_for,
    blocked,
    decide,
    first_match,
)
from storage.audit import AuditLog
from storage.policy_limits import PolicyLimits
from storage.stores import Stores

AUDIT_ACTION = "policy.decided"
ACTOR = "policy"


@dataclass(frozen=True)
class PolicyGated:
    """What the flow needs to create one approval under the fleet policies: the decision,
    the approval rules (the policy's approvers and two-person) and the fields to add to the
    approval's action dict (``policy``, ``policy_mode``, ``host``; empty without a policy)."""

    decision: PolicyDecision
    rules: ApprovalPolicy
    extra: dict[str, str]


class PolicyGate:
    def __init__(self, policies: Sequence[Policy], limits: FleetLimits, counter: PolicyLimits,
                 audit: AuditLog | None, *, clock: Callable[[], float] = time.time) -> None:
        self.policies, self.limits, self.counter = tuple(policies), limits, counter
        self.audit, self.clock = audit, clock

    def evaluate(self, action: ActionLike, host: str, incident_kind: str) -> PolicyDecision:
        """The mode this action would get now, before counting (no write)."""
        policy = first_match(self.policies, action, host, incident_kind)
        now, breaker = self.clock(), self.counter.breaker()
        early = blocked(policy, now, breaker, self.limits)
        return early or decide(policy, now, None, breaker, action.kind, self.limits)

    def commit(self, decision: PolicyDecision, action: ActionLike, host: str,
               incident_id: str) -> PolicyDecision:
        """Take the slot an ``auto`` decision needs (or fall back), and audit the result."""
        final = decision
        policy = decision.policy
        if decision.mode is PolicyMode.AUTO and policy is not None:
            limit = policy.limit
            admission = self.counter.try_count(
                policy.name, host, self.clock(), limit.per_s if limit else self.limits.per_s,
                limit.max_hosts if limit else 0)
            final = decide(policy, self.clock(), admission, _closed(), action.kind, self.limits)
        self._audit(final, action, host, incident_id)
        return final

    def decide(self, action: ActionLike, host: str, incident_kind: str,
               incident_id: str) -> PolicyDecision:
        """``evaluate`` then ``commit``: what the flow calls once per proposed action."""
        return self.commit(self.evaluate(action, host, incident_kind), action, host,
                           incident_id)

    def gate(self, action: ActionLike, host: str, incident_kind: str, incident_id: str,
             base: ApprovalPolicy) -> PolicyGated:
        """``decide`` plus what creating the approval needs (see ``PolicyGated``)."""
        d = self.decide(action, host, incident_kind, incident_id)
        extra = ({"policy": d.policy_name, "policy_mode": d.mode.value, "host": host}
                 if d.policy else {})
        return PolicyGated(d, approval_policy_for(base, d.policy, action.kind), extra)

    def approval_policy(self, decision: PolicyDecision, base: ApprovalPolicy,
                        kind: str) -> ApprovalPolicy:
        """Who may approve when the decision asks for a click (the policy's approvers)."""
        return approval_policy_for(base, decision.policy, kind)

    def _audit(self, decision: PolicyDecision, action: ActionLike, host: str,
               incident_id: str) -> None:
        if self.audit is None:
            return
        detail = {"policy": decision.policy_name, "mode": decision.mode.value,
                  "configured": decision.policy.mode.value if decision.policy else "",
                  "reason": decision.reason, "kind": action.kind,
                  "params": dict(action.params), "host": host, "hosts": list(decision.hosts)}
        self.audit.append(incident_id, ACTOR, AUDIT_ACTION, detail)


def _closed() -> BreakerState:
    """The count already answered for the breaker; ``decide`` reads it from the admission."""
    return BreakerState()


def refusal(decision: PolicyDecision, who: str, kind: str, host: str) -> str:
    """A refusal naming the policy and who may approve instead."""
    return strings.POLICY_REFUSED.format(policy=decision.policy_name or "(none)", who=who,
                                         kind=kind, host=host)


def gate_from_settings(settings: Settings, stores: Stores, *,
                       clock: Callable[[], float] = time.time) -> PolicyGate:
    """The gate ``serve`` builds once: policies, the fleet cap from the inventory's size."""
    limits = fleet_limits_from_settings(settings)
    counter = stores.policy_limits(fleet_cap=limits.cap(len(settings.hosts)),
                                   fleet_window_s=limits.per_s, clock=clock)
    return PolicyGate(policies_from_settings(settings), limits, counter,
                      stores.audit(clock=clock), clock=clock)
