"""Which hosts need a person, across every cause, in one order (pure; issue 37).

At 400 hosts a list sorted by one measure hides the others: sorted by idle VRAM, a host
about to fill its disk but holding nothing idle is the 380th line. The digest, its chart
and the Home tab all rank hosts with ``rank_hosts`` over the same facts:

1. **full soon**: a disk that fills within ``full_days`` at its current growth, or is at
   ``full_pct`` already (then counted as a day at most). A full disk stops the work on the
   host (the seed story), so this comes first, the soonest first: ``10,000 / (1 + days)``
   points.
2. **repeatedly failing**: an incident whose action or diagnosis failed, or
   ``failing_incidents`` incidents or more in the period: a person must look.
   ``1,000 + 100 × failed + 10 × incidents`` points.
3. **drained too long**: a Slurm node out of the scheduler for ``drained_h`` or more:
   its GPUs × hours out, plus 100.
4. **held idle**: VRAM held at ~0 % utilisation: the GPU-hours wasted (or, for a view of
   now, the GPUs held idle this moment, as one hour each).

A host's score is its highest reason's points plus a tenth of the others'; the reasons
are kept, highest first, so the line says all of them. Hosts with no reason are left
out of the ranking (the callers say how many need nothing).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

NOW = "now"  # a held-idle reason read from the latest samples, not a period


class Need(StrEnum):
    FULL_SOON = "full_soon"
    FAILING = "failing"
    DRAINED = "drained"
    HELD_IDLE = "held_idle"


@dataclass(frozen=True)
class DiskFact:
    mount: str
    used_pct: float | None
    days_until_full: float | None


@dataclass(frozen=True)
class HostFacts:
    """What the ranking reads of one host (any source: a digest period, or now)."""

    host: str
    gpus: int = 0
    idle_gpu_hours: float = 0.0  # VRAM held at ~0 % utilisation over the period
    disks: tuple[DiskFact, ...] = ()
    incidents: int = 0  # in the period (or open now)
    failed: int = 0  # of those, an action or a diagnosis failed
    drained_h: float | None = None  # hours out of the scheduler (None: not drained)
    held_idle_now: int = 0  # GPUs holding VRAM at ~0 % this moment (a view of now)


@dataclass(frozen=True)
class Reason:
    need: Need
    points: float
    value: float  # days (full soon), failed incidents, hours drained, GPU-hours idle
    detail: str = ""  # the mount that fills; empty otherwise
    extra: float = 0.0  # used % (full soon), incidents in all (failing)


@dataclass(frozen=True)
class HostNeed:
    host: str
    score: float
    reasons: tuple[Reason, ...]


@dataclass(frozen=True)
class NeedThresholds:
    full_days: float = 7.0
    full_pct: float = 95.0
    failing_incidents: int = 3
    drained_h: float = 24.0
    idle_gpu_hours: float = 1.0


def reasons(f: HostFacts, t: NeedThresholds) -> list[Reason]:
    """Every cause this host needs a person for, highest points first."""
    out = [r for disk in f.disks if (r := _full(disk, t)) is not None]
    out = sorted(out, key=lambda r: -r.points)[:1]  # the disk that fills first speaks
    if f.failed or f.incidents >= t.failing_incidents:
        out.append(Reason(Need.FAILING, 1000 + 100 * f.failed + 10 * f.incidents, f.failed,
                          extra=f.incidents))
    if f.drained_h is not None and f.drained_h >= t.drained_h:
        out.append(Reason(Need.DRAINED, 100 + max(f.gpus, 1) * f.drained_h, f.drained_h))
    if f.idle_gpu_hours >= t.idle_gpu_hours:
        out.append(Reason(Need.HELD_IDLE, f.idle_gpu_hours, f.idle_gpu_hours))
    elif f.held_idle_now:  # now: each GPU held idle counts as an hour about to be wasted
        out.append(Reason(Need.HELD_IDLE, f.held_idle_now, f.held_idle_now, NOW))
    return sorted(out, key=lambda r: -r.points)


def _full(d: DiskFact, t: NeedThresholds) -> Reason | None:
    if d.used_pct is not None and d.used_pct >= t.full_pct:  # any write may fill it
        known = d.days_until_full
        soon = known if known is not None and known <= 1.0 else None
        # value 0: said as "at N %" (its growth says later than a day, or nothing)
        return Reason(Need.FULL_SOON, 10_000 / (1 + (soon if soon is not None else 1.0)),
                      soon or 0.0, d.mount, d.used_pct)
    if d.days_until_full is not None and d.days_until_full <= t.full_days:
        return Reason(Need.FULL_SOON, 10_000 / (1 + d.days_until_full), d.days_until_full,
                      d.mount, d.used_pct or 0.0)
    return None


def rank_hosts(facts: Iterable[HostFacts],
               thresholds: NeedThresholds | None = None) -> list[HostNeed]:
    """The hosts that need a person, most urgent first (ties: by name)."""
    t = thresholds or NeedThresholds()
    out = []
    for f in facts:
        why = reasons(f, t)
        if why:
            score = why[0].points + sum(r.points for r in why[1:]) / 10
            out.append(HostNeed(f.host, score, tuple(why)))
    return sorted(out, key=lambda n: (-n.score, n.host))


def order_hosts(hosts: Iterable[str], ranked: Sequence[HostNeed]) -> list[str]:
    """Every host once: those that need a person in rank order, then the rest by name."""
    first = [n.host for n in ranked]
    seen = set(first)
    return first + sorted(h for h in set(hosts) if h not in seen)


def slope_per_s(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of value over time; None without two distinct timestamps."""
    if len(points) < 2:
        return None
    mt = statistics.fmean(t for t, _ in points)
    mv = statistics.fmean(v for _, v in points)
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / var


def days_until_full(used: Sequence[tuple[float, float]], size: float | None) -> float | None:
    """At the least-squares growth of ``used`` (bytes over time), days until ``size``; None
    when it is not growing or the size is unknown."""
    slope = slope_per_s(used)
    if slope is None or slope <= 0 or not size or not used:
        return None
    return max(0.0, (size - used[-1][1]) / (slope * 86400.0))
