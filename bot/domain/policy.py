"""Fleet policy: which proposed actions run without a click, and within what limits. Pure.

Policies are evaluated in config order and the first match wins. A match picks a mode:
``auto`` (run now, posted as done by the policy), ``shadow`` (say what it would have
run, still ask) or ``approve`` (ask, with the policy's approvers). ``auto`` is never
unconditional: outside its ``not_during`` window, with the fleet breaker closed, and
under its blast-radius limit, else it falls back to ``approve`` with the reason in words.
Counting hosts is storage's job (atomic across replicas, ``storage/policy_limits.py``);
this module only decides from what was counted, so every rule here is testable alone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Protocol

from bot.core import fmt, strings
from bot.domain.approval import ApprovalPolicy
from bot.domain.windows import WeeklyWindow

HOUR_S = 3600.0


class PolicyMode(StrEnum):
    AUTO = "auto"
    SHADOW = "shadow"
    APPROVE = "approve"


class ActionLike(Protocol):
    """What matching reads of a proposed action (``findings.ProposedAction`` fits)."""

    @property
    def kind(self) -> str: ...

    @property
    def params(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class ActionRef:
    """A proposed action reduced to what policies match on (CLI, replay, tests)."""

    kind: str
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyMatch:
    """Globs (``fnmatch``, case-sensitive) over the action, host and incident kind.

    ``unit`` is short for ``params: {unit: ...}``; an empty ``kinds`` matches every
    incident kind; a params glob for a parameter the action lacks does not match.
    """

    action: str = "*"
    hosts: str = "*"
    kinds: tuple[str, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    unit: str | None = None

    def globs(self) -> dict[str, str]:
        out = dict(self.params)
        if self.unit is not None:
            out["unit"] = self.unit
        return out

    def matches(self, action: ActionLike, host: str, incident_kind: str) -> bool:
        if not fnmatchcase(action.kind, self.action) or not fnmatchcase(host, self.hosts):
            return False
        if self.kinds and incident_kind not in self.kinds:
            return False
        return all(name in action.params and fnmatchcase(str(action.params[name]), glob)
                   for name, glob in self.globs().items())


@dataclass(frozen=True)
class BlastLimit:
    """At most ``max_hosts`` distinct hosts acted on under one policy per ``per_s``."""

    max_hosts: int
    per_s: float = HOUR_S


@dataclass(frozen=True)
class Policy:
    name: str
    match: PolicyMatch = field(default_factory=PolicyMatch)
    mode: PolicyMode = PolicyMode.APPROVE
    limit: BlastLimit | None = None
    approvers: tuple[str, ...] = ()  # empty: the global approvers (``ApprovalPolicy``)
    two_person: bool = False
    not_during: WeeklyWindow | None = None


@dataclass(frozen=True)
class FleetLimits:
    """The global breaker: automatic hosts per hour over every policy, absolute and as a
    fraction of the inventory; whichever is smaller is the cap (the NVSentinel lesson:
    a fraction alone is too coarse on a small fleet, a count alone on a large one)."""

    max_hosts_per_hour: int = 10
    max_fraction: float = 0.5
    per_s: float = HOUR_S

    def cap(self, inventory_hosts: int) -> int:
        return min(self.max_hosts_per_hour, math.floor(self.max_fraction * inventory_hosts))


@dataclass(frozen=True)
class Admission:
    """What the atomic count answered for one host: admitted, and the hosts in the window
    (including this one when admitted). ``breaker`` is the fleet cap stopping it;
    ``tripped`` is true for the one call that opened the breaker (it records the trip)."""

    admitted: bool
    hosts: tuple[str, ...] = ()
    breaker: bool = False
    tripped: bool = False
    fleet_hosts: tuple[str, ...] = ()  # hosts acted on automatically fleet-wide, in the hour
    cap: int = 0  # the fleet cap the breaker compared against


@dataclass(frozen=True)
class BreakerState:
    open: bool = False
    hosts: tuple[str, ...] = ()
    cap: int = 0


@dataclass(frozen=True)
class PolicyDecision:
    """The mode this action gets now, the policy that decided (None: no match) and why."""

    mode: PolicyMode
    policy: Policy | None
    reason: str
    hosts: tuple[str, ...] = ()  # hosts counted in the policy's window, when one was asked

    @property
    def policy_name(self) -> str:
        return self.policy.name if self.policy else ""

    @property
    def fell_back(self) -> bool:
        """An ``auto`` or ``shadow`` policy that had to ask instead (limit, window, breaker)."""
        return self.policy is not None and self.mode is not self.policy.mode


def first_match(policies: Sequence[Policy], action: ActionLike, host: str,
                incident_kind: str) -> Policy | None:
    """The first policy in config order whose match covers this action on this host."""
    return next((p for p in policies if p.match.matches(action, host, incident_kind)), None)


def period_words(seconds: float) -> str:
    """``hour`` for 3600 s, ``day``, ``minute``; else a duration (``30 min``)."""
    named = {60.0: "minute", HOUR_S: "hour", 86400.0: "day"}
    return named.get(float(seconds), fmt.duration(seconds))


def blocked(policy: Policy | None, now: float, breaker: BreakerState,
            limits: FleetLimits | None = None) -> PolicyDecision | None:
    """The decision when nothing needs counting: no policy, ``approve``, a window, an open
    breaker. None: the action may run (or be shadowed) once counted."""
    if policy is None:
        return PolicyDecision(PolicyMode.APPROVE, None, strings.POLICY_NONE)
    if policy.mode is PolicyMode.APPROVE:
        return PolicyDecision(PolicyMode.APPROVE, policy, strings.POLICY_APPROVE.format(
            policy=policy.name))
    if policy.not_during is not None and policy.not_during.contains(now):
        return PolicyDecision(PolicyMode.APPROVE, policy, strings.POLICY_WINDOW.format(
            policy=policy.name, window=policy.not_during.text))
    if breaker.open and policy.mode is PolicyMode.AUTO:
        return PolicyDecision(PolicyMode.APPROVE, policy, breaker_text(breaker, limits))
    return None


def decide(policy: Policy | None, now: float, counted: Admission | None,
           breaker: BreakerState, kind: str = "",
           limits: FleetLimits | None = None) -> PolicyDecision:
    """The mode for one action: see the module docstring. ``counted`` is the atomic
    count's answer for ``auto`` (None for ``shadow``, which changes nothing and so
    counts nothing)."""
    early = blocked(policy, now, breaker, limits)
    if early is not None or policy is None:  # blocked() answers for a missing policy
        return early or PolicyDecision(PolicyMode.APPROVE, None, strings.POLICY_NONE)
    if policy.mode is PolicyMode.SHADOW:
        return PolicyDecision(PolicyMode.SHADOW, policy, strings.POLICY_SHADOW.format(
            kind=kind or policy.match.action, policy=policy.name))
    if counted is None or counted.admitted:
        hosts = counted.hosts if counted else ()
        return PolicyDecision(PolicyMode.AUTO, policy,
                              strings.POLICY_AUTO.format(policy=policy.name), hosts)
    if counted.breaker:
        state = BreakerState(True, counted.fleet_hosts, counted.cap)
        reason = breaker_text(state, limits)
    else:
        reason = limit_text(policy, counted.hosts)
    return PolicyDecision(PolicyMode.APPROVE, policy, reason, counted.hosts)


def host_count(n: int) -> str:
    """``1 host``, ``3 hosts``: the count as a person writes it."""
    return f"{n} host" if n == 1 else f"{n} hosts"


def limit_text(policy: Policy, hosts: Iterable[str]) -> str:
    """"limit reached: 3 hosts in the last hour (gpu-03, gpu-07, gpu-11)"."""
    names = sorted(hosts)
    per = policy.limit.per_s if policy.limit else HOUR_S
    return strings.POLICY_LIMIT.format(n_hosts=host_count(len(names)),
                                       period=period_words(per), hosts=", ".join(names))


def breaker_text(state: BreakerState, limits: FleetLimits | None) -> str:
    per = limits.per_s if limits else HOUR_S
    return strings.POLICY_BREAKER.format(n_hosts=host_count(len(state.hosts)),
                                         period=period_words(per), cap=state.cap)


def approvers_for(policy: Policy | None, default: frozenset[str]) -> frozenset[str]:
    """Who may approve when a policy asks for a click: its own list, else the default."""
    return frozenset(policy.approvers) if policy and policy.approvers else default


def required_for(policy: Policy | None, default: int) -> int:
    """Two approvers when the policy says so; never fewer than the kind already needs."""
    return max(default, 2) if policy and policy.two_person else default


def approval_policy_for(base: ApprovalPolicy, policy: Policy | None,
                        kind: str) -> ApprovalPolicy:
    """The approval rules for one action a policy asks a click for: the policy's approvers
    replace the list for that kind, and ``two_person`` adds the kind to the two-person
    set. No policy, no approvers of its own: ``base`` unchanged (today's behaviour)."""
    if policy is None or not (policy.approvers or policy.two_person):
        return base
    per_kind = dict(base.per_kind)
    if policy.approvers:
        per_kind[kind] = frozenset(policy.approvers)
    two = base.two_person | {kind} if policy.two_person else base.two_person
    return replace(base, per_kind=per_kind, two_person=two)
