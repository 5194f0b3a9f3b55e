"""The digest's facts per host for the ranking by action needed (issue 37): its disks'
fill, its idle-held VRAM, its incidents of the period and how long its Slurm node has been
drained, from the period's model (pure; the ranking itself is ``bot.domain.fleet_needs``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from bot.digest.model import HostStats, IncidentRecord
from bot.domain.fleet_needs import DiskFact, HostFacts, HostNeed, NeedThresholds, rank_hosts
from bot.domain.slurm import DrainedNode

FAILED_STATES = frozenset({"action_failed", "diagnosis_failed"})


def host_facts(hosts: Sequence[HostStats], incidents: Iterable[IncidentRecord],
               drained: Iterable[DrainedNode], start: float, end: float) -> list[HostFacts]:
    """One ``HostFacts`` per host the period knows of: sampled, alerted or drained."""
    opened, failed = Counter[str](), Counter[str]()
    for i in incidents:
        if start <= i.opened_at < end:
            opened[i.host] += 1
            failed[i.host] += i.state in FAILED_STATES
    out_h = {n.name: (end - n.since) / 3600 for n in drained if n.since is not None}
    stats = {h.host: h for h in hosts}
    names = set(stats) | set(opened) | set(out_h)
    return [_facts(name, stats.get(name), opened[name], failed[name], out_h.get(name))
            for name in sorted(names)]


def _facts(host: str, h: HostStats | None, incidents: int, failed: int,
           drained_h: float | None) -> HostFacts:
    disks = tuple(DiskFact(d.mount, d.used_pct, d.days_until_full) for d in (h.disks if h else ()))
    return HostFacts(host, len(h.gpus) if h else 0, (h.idle_gpu_minutes / 60) if h else 0.0,
                     disks, incidents, failed, drained_h)


def digest_needs(hosts: Sequence[HostStats], incidents: Iterable[IncidentRecord],
                 drained: Iterable[DrainedNode], start: float, end: float,
                 thresholds: NeedThresholds | None = None) -> tuple[HostNeed, ...]:
    return tuple(rank_hosts(host_facts(hosts, incidents, drained, start, end), thresholds))
