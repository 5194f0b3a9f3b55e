"""The health digest's numbers, computed purely from samples and records.

Why pure: the digest is what operators read every morning, so every figure (idle
GPU-minutes, days until a disk is full, time to resolve) is a function tested on
hand-made data; fetching (Redis) and posting (chat) live in ``bot.digest.runner``.
Rendering to a ``ChatMessage`` is in ``bot.digest.render``.
"""

from __future__ import annotations

import itertools
import re
import statistics
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.digest.response_stats import ResponseRow
from bot.digest.settings import DigestSchedule, DigestSettings  # noqa: F401 - re-exported
from bot.domain.fleet_needs import HostNeed, slope_per_s
from bot.domain.incident import IncidentSummary
from bot.domain.repeat import RepeatOffence
from bot.domain.slurm import DrainedNode

Point = tuple[float, float]
GPU_METRIC = re.compile(r"^gpu(?P<index>\d{1,3})\.(?P<field>mem_used_mib|mem_total_mib|util_pct)$")
DISK_METRIC = re.compile(r"^disk:(?P<mount>/.*)\.(?P<field>used_bytes|size_bytes)$")
DAY_S = 86400.0


@dataclass(frozen=True)
class Stat:
    min: float
    avg: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat | None:
        if not values:
            return None
        return cls(min(values), statistics.fmean(values), max(values))


@dataclass(frozen=True)
class GpuStats:
    index: int
    mem_used_mib: Stat | None
    util_pct: Stat | None
    mem_total_mib: float | None
    idle_minutes: float


@dataclass(frozen=True)
class DiskStats:
    mount: str
    used_bytes: float
    size_bytes: float | None
    growth_bytes_per_day: float | None
    days_until_full: float | None

    @property
    def used_pct(self) -> float | None:
        return 100.0 * self.used_bytes / self.size_bytes if self.size_bytes else None


@dataclass(frozen=True)
class HostStats:
    host: str
    gpus: tuple[GpuStats, ...] = ()
    disks: tuple[DiskStats, ...] = ()

    @property
    def idle_gpu_minutes(self) -> float:
        return sum(g.idle_minutes for g in self.gpus)

    def gpu_stat(self, name: str) -> Stat | None:
        """Host-wide min/avg/max over every GPU's (``mem_used_mib`` or ``util_pct``) stats."""
        stats = [s for g in self.gpus if (s := getattr(g, name)) is not None]
        if not stats:
            return None
        return Stat(min(s.min for s in stats), statistics.fmean(s.avg for s in stats),
                    max(s.max for s in stats))


@dataclass(frozen=True)
class IncidentRecord(IncidentSummary):
    """An incident as the digest counts it: when it closed and whose GPUs it was about."""

    resolved_at: float | None = None
    unit: str = ""  # the unit found holding the GPUs (``holder_unit`` of its diagnosis)


@dataclass(frozen=True)
class ActionRecord:
    incident_id: str
    kind: str
    result: str  # "verified" | "failed" | "reverted" | ...
    at: float
    actor: str = ""


@dataclass(frozen=True)
class JobRecord:
    id: str
    host: str
    state: str
    done: int
    total: int
    rate: float | None = None


@dataclass(frozen=True)
class IncidentStats:
    opened: int
    resolved: int
    still_open: int
    ttr_median_s: float | None
    ttr_max_s: float | None
    opened_by_kind: dict[str, int] = field(default_factory=dict)


UNATTRIBUTED = "unattributed"  # idle VRAM no incident named a unit for


@dataclass(frozen=True)
class Waste:
    """GPU-hours of VRAM held at ~0% utilisation, per host and per holding unit."""

    by_host: dict[str, float] = field(default_factory=dict)
    by_unit: dict[str, float] = field(default_factory=dict)
    idle_util_pct: float = 5.0  # "idle" is at or below this utilisation

    @property
    def total(self) -> float:
        return sum(self.by_host.values())


@dataclass(frozen=True)
class Digest:
    start: float
    end: float
    hosts: tuple[HostStats, ...]
    incidents: IncidentStats
    actions: dict[tuple[str, str], int]
    jobs: tuple[JobRecord, ...]
    waste: Waste = field(default_factory=Waste)
    drained: tuple[DrainedNode, ...] = ()  # Slurm nodes out of the scheduler at its end
    response: tuple[ResponseRow, ...] = ()  # MTTA / MTTR per kind of the period's incidents
    needs: tuple[HostNeed, ...] = ()  # hosts a person should look at, most urgent first
    rma: tuple[RepeatOffence, ...] = ()  # nodes sent to RMA: a fault back after a passed gate

    @property
    def idle_gpu_minutes(self) -> float:
        return sum(h.idle_gpu_minutes for h in self.hosts)


SeriesByHost = Mapping[str, Mapping[str, Sequence[Point]]]
GpuSeries = dict[int, dict[str, list[Point]]]
DiskSeries = dict[str, dict[str, list[Point]]]


def split_metrics(series: Mapping[str, Sequence[Point]]) -> tuple[GpuSeries, DiskSeries]:
    """Group raw series into ``{gpu index: {field: points}}`` and ``{mount: {field: points}}``."""
    gpus: GpuSeries = {}
    disks: DiskSeries = {}
    for name, points in series.items():
        if m := GPU_METRIC.match(name):
            gpus.setdefault(int(m["index"]), {})[m["field"]] = sorted(points)
        elif m := DISK_METRIC.match(name):
            disks.setdefault(m["mount"], {})[m["field"]] = sorted(points)
    return gpus, disks


def _nearest(points: Sequence[Point], ts: float, max_gap_s: float) -> float | None:
    """Value of the sample nearest ``ts`` (within ``max_gap_s``), or None."""
    if not points:
        return None
    i = bisect_left(points, (ts, float("-inf")))
    near = [points[j] for j in (i - 1, i) if 0 <= j < len(points)]
    best = min(near, key=lambda p: abs(p[0] - ts))
    return best[1] if abs(best[0] - ts) <= max_gap_s else None


def idle_spans(mem: Sequence[Point], util: Sequence[Point], cfg: DigestSettings,
               start: float, end: float) -> list[Point]:
    """``(from, to)`` spans between samples where VRAM was held at ~0 utilisation."""
    spans: list[Point] = []
    for (t0, used), (t1, _) in itertools.pairwise(mem):
        lo, hi = max(t0, start), min(t1, end, t0 + cfg.max_gap_s)
        if hi <= lo or used < cfg.idle_mem_mib:
            continue
        u = _nearest(util, t0, cfg.max_gap_s)
        if u is not None and u <= cfg.idle_util_pct:
            spans.append((lo, hi))
    return spans


def idle_minutes(mem: Sequence[Point], util: Sequence[Point], cfg: DigestSettings,
                 start: float, end: float) -> float:
    """Minutes between samples where VRAM was held (>= idle_mem_mib) at ~0 utilisation."""
    return sum(hi - lo for lo, hi in idle_spans(mem, util, cfg, start, end)) / 60.0


def gpu_stats(index: int, fields: Mapping[str, Sequence[Point]], cfg: DigestSettings,
              start: float, end: float) -> GpuStats:
    mem = list(fields.get("mem_used_mib", ()))
    util = list(fields.get("util_pct", ()))
    totals = fields.get("mem_total_mib", ())
    return GpuStats(
        index=index,
        mem_used_mib=Stat.of([v for _, v in mem]),
        util_pct=Stat.of([v for _, v in util]),
        mem_total_mib=totals[-1][1] if totals else None,
        idle_minutes=idle_minutes(mem, util, cfg, start, end),
    )


def disk_stats(mount: str, fields: Mapping[str, Sequence[Point]]) -> DiskStats | None:
    used = fields.get("used_bytes", ())
    if not used:
        return None
    sizes = fields.get("size_bytes", ())
    size = sizes[-1][1] if sizes else None
    slope = slope_per_s(used)
    per_day = slope * DAY_S if slope is not None else None
    last = used[-1][1]
    days = None
    if per_day is not None and per_day > 0 and size is not None:
        days = max(0.0, (size - last) / per_day)
    return DiskStats(mount, last, size, per_day, days)


def host_stats(host: str, series: Mapping[str, Sequence[Point]], cfg: DigestSettings,
               start: float, end: float) -> HostStats:
    gpus, disks = split_metrics(series)
    return HostStats(
        host=host,
        gpus=tuple(gpu_stats(i, gpus[i], cfg, start, end) for i in sorted(gpus)),
        disks=tuple(d for m in sorted(disks) if (d := disk_stats(m, disks[m])) is not None),
    )


def incident_stats(incidents: Iterable[IncidentRecord], start: float, end: float) -> IncidentStats:
    items = list(incidents)
    opened = [i for i in items if start <= i.opened_at < end]
    resolved = [i for i in items if i.resolved_at is not None and start <= i.resolved_at < end]
    ttrs = [i.resolved_at - i.opened_at for i in resolved if i.resolved_at is not None]
    return IncidentStats(
        opened=len(opened),
        resolved=len(resolved),
        still_open=sum(1 for i in items if i.resolved_at is None and i.opened_at < end),
        ttr_median_s=statistics.median(ttrs) if ttrs else None,
        ttr_max_s=max(ttrs) if ttrs else None,
        opened_by_kind=dict(Counter(i.kind for i in opened)),
    )


def action_counts(actions: Iterable[ActionRecord], start: float,
                  end: float) -> dict[tuple[str, str], int]:
    return dict(Counter((a.kind, a.result) for a in actions if start <= a.at < end))
