"""What the policies would have done: ``policy check`` rows and ``policy replay``. Pure.

``check`` answers "which policy does this action on this host hit" for the whole
catalog before a config goes live; params and incident kinds not given are conditions,
printed as such, and the chain stops at the first policy that matches unconditionally.
``replay`` walks past human-approved actions in time order through the same ``decide``
as the live gate, with an in-memory count that mirrors ``storage/policy_limits.py``'s
script (distinct hosts per window, a host counted once, the fleet breaker), so "would
have run automatically" and "would have hit the limit" mean what they would mean live.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from bot.domain.policy import (
    ActionRef,
    Admission,
    BreakerState,
    FleetLimits,
    Policy,
    PolicyDecision,
    PolicyMode,
    decide,
    first_match,
)


@dataclass(frozen=True)
class CheckRow:
    host: str
    action: str
    policy: Policy | None
    conditions: tuple[str, ...] = ()  # what must also hold for this policy to apply


def conditions(policy: Policy, action: ActionRef, incident_kind: str | None) -> tuple[str, ...]:
    """The parts of ``policy.match`` the facts at hand do not settle (None: no match)."""
    out: list[str] = []
    for name, glob in policy.match.globs().items():
        if name in action.params:
            continue  # settled by matches() below
        out.append(f"{name} {glob}")
    if policy.match.kinds and incident_kind is None:
        out.append("incident " + ", ".join(policy.match.kinds))
    return tuple(out)


def _settled(policy: Policy, action: ActionRef, host: str, incident_kind: str | None) -> bool:
    m = policy.match
    if not fnmatchcase(action.kind, m.action) or not fnmatchcase(host, m.hosts):
        return False
    if incident_kind is not None and m.kinds and incident_kind not in m.kinds:
        return False
    return all(fnmatchcase(action.params[n], g) for n, g in m.globs().items()
               if n in action.params)


def check_rows(policies: Sequence[Policy], hosts: Iterable[str], kinds: Iterable[str],
               params: Mapping[str, str] | None = None,
               incident_kind: str | None = None) -> list[CheckRow]:
    """One row per policy that may apply, per (host, action kind), in match order; the
    last row of each pair has no conditions (a policy, or None: no policy, approve)."""
    rows: list[CheckRow] = []
    for host in hosts:
        for kind in kinds:
            action = ActionRef(kind, dict(params or {}))
            for policy in policies:
                if not _settled(policy, action, host, incident_kind):
                    continue
                cond = conditions(policy, action, incident_kind)
                rows.append(CheckRow(host, kind, policy, cond))
                if not cond:
                    break
            else:
                rows.append(CheckRow(host, kind, None))
    return rows


@dataclass(frozen=True)
class PastAction:
    """One human-approved action from the audit stream."""

    ts: float
    incident_id: str
    host: str
    action: ActionRef
    incident_kind: str
    approver: str = ""


@dataclass
class Counter:
    """``storage/policy_limits.py``'s count, in memory, for a replay in time order."""

    fleet_cap: int
    fleet_window_s: float = 3600.0
    per_policy: dict[str, dict[str, float]] = field(default_factory=dict)
    fleet: dict[str, float] = field(default_factory=dict)
    breaker_until: float = 0.0

    def try_count(self, policy: Policy, host: str, now: float) -> Admission:
        window = policy.limit.per_s if policy.limit else self.fleet_window_s
        counted = _prune(self.per_policy.setdefault(policy.name, {}), now - window)
        fleet = _prune(self.fleet, now - self.fleet_window_s)
        if now < self.breaker_until:
            return Admission(False, tuple(counted), breaker=True, fleet_hosts=tuple(fleet),
                             cap=self.fleet_cap)
        if host in counted:
            return Admission(True, tuple(counted))
        if policy.limit and len(counted) >= policy.limit.max_hosts:
            return Admission(False, tuple(counted))
        if host not in fleet and len(fleet) >= self.fleet_cap:
            self.breaker_until = now + self.fleet_window_s
            return Admission(False, tuple(counted), breaker=True, tripped=True,
                             fleet_hosts=tuple(fleet), cap=self.fleet_cap)
        counted[host] = now
        fleet.setdefault(host, now)
        return Admission(True, tuple(counted))


def _prune(hosts: dict[str, float], oldest: float) -> dict[str, float]:
    for host in [h for h, t in hosts.items() if t <= oldest]:
        del hosts[host]
    return hosts


def replay(policies: Sequence[Policy], past: Iterable[PastAction], limits: FleetLimits,
           inventory_hosts: int) -> list[tuple[PastAction, PolicyDecision]]:
    """Each past action with the decision the current policies would have made then."""
    counter = Counter(limits.cap(inventory_hosts), limits.per_s)
    out = []
    for item in sorted(past, key=lambda p: p.ts):
        policy = first_match(policies, item.action, item.host, item.incident_kind)
        first = decide(policy, item.ts, None, BreakerState(), item.action.kind, limits)
        counted = None
        if first.mode is PolicyMode.AUTO and policy is not None:
            counted = counter.try_count(policy, item.host, item.ts)
        out.append((item, decide(policy, item.ts, counted, BreakerState(), item.action.kind,
                                 limits)))
    return out
