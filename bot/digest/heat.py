"""Host × hour cells for the fleet chart (pure; issue 37): the share of each hour's GPU
time a host held VRAM at ~0 % utilisation, and how full its fullest disk was.

Lines per host stop being readable past a handful of hosts, and at 30-minute sampling a
line chart's idle bands turn to stripes (each sample counts for ``max_gap_s``, 10 min, of
its 30). An hour's share is read the same at any sampling step: the idle spans of
``bot.digest.model.idle_spans`` cut by the hour, summed over the host's GPUs, over the
time the samples cover in that hour (each sample covering until the next, at most
``max_gap_s``, the same cap). A cell no sample covers is None (drawn grey), never 0:
"no data" must not read as "not idle".
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.digest.model import DigestSettings, Point, SeriesByHost, idle_spans, split_metrics

MAX_BINS = 48  # a longer period merges hours into wider cells


@dataclass(frozen=True)
class HeatRow:
    host: str
    idle: tuple[float | None, ...]  # share 0..1 of the cell's GPU time held idle
    disk: tuple[float | None, ...]  # % used of the fullest disk in the cell (its last sample)


def cells(start: float, end: float, max_bins: int = MAX_BINS) -> list[Point]:
    """``(from, to)`` of each cell: whole hours, widened so there are at most ``max_bins``."""
    hours = max(1, round((end - start) / 3600))
    per = -(-hours // max_bins)  # ceiling: hours per cell
    width = per * 3600.0
    n = max(1, -(-int(end - start) // int(width)))
    return [(start + k * width, min(end, start + (k + 1) * width)) for k in range(n)]


def heat_row(host: str, series: Mapping[str, Sequence[Point]], cfg: DigestSettings,
             bins: Sequence[Point]) -> HeatRow:
    gpus, disks = split_metrics(series)
    start, end = bins[0][0], bins[-1][1]
    idle, covered = [0.0] * len(bins), [0.0] * len(bins)
    for fields in gpus.values():
        mem = fields.get("mem_used_mib", ())
        for (t0, _), (t1, _) in itertools.pairwise(mem):
            _spread(covered, bins, max(t0, start), min(t1, end, t0 + cfg.max_gap_s))
        for lo, hi in idle_spans(mem, fields.get("util_pct", ()), cfg, start, end):
            _spread(idle, bins, lo, hi)
    shares = tuple(min(1.0, idle[k] / covered[k]) if covered[k] > 0 else None
                   for k in range(len(bins)))
    return HeatRow(host, shares, _disk_pcts(disks, bins))


def _spread(acc: list[float], bins: Sequence[Point], lo: float, hi: float) -> None:
    """Add the seconds of ``[lo, hi)`` to each cell they overlap."""
    if hi <= lo:
        return
    for k in range(_bin(bins, lo) or 0, (_bin(bins, hi) or len(bins) - 1) + 1):
        b0, b1 = bins[k]
        acc[k] += max(0.0, min(hi, b1) - max(lo, b0))


def _bin(bins: Sequence[Point], t: float) -> int | None:
    """The cell holding ``t`` (cells are equal but the last): arithmetic, not a search."""
    start, width = bins[0][0], bins[0][1] - bins[0][0]
    if t < start or t >= bins[-1][1] or width <= 0:
        return None
    return min(len(bins) - 1, int((t - start) // width))


def _disk_pcts(disks: Mapping[str, Mapping[str, Sequence[Point]]],
               bins: Sequence[Point]) -> tuple[float | None, ...]:
    """Per cell, the fullest mount's last reading inside it (None: no reading)."""
    best: list[float | None] = [None] * len(bins)
    for fields in disks.values():
        sizes = fields.get("size_bytes", ())
        if not sizes or sizes[-1][1] <= 0:
            continue
        last: dict[int, float] = {}
        for t, v in fields.get("used_bytes", ()):  # sorted by time: the last one stays
            if (k := _bin(bins, t)) is not None:
                last[k] = 100.0 * v / sizes[-1][1]
        for k, pct in last.items():
            current = best[k]
            best[k] = pct if current is None else max(current, pct)
    return tuple(best)


def heat_rows(series_by_host: SeriesByHost, hosts: Sequence[str], cfg: DigestSettings,
              start: float, end: float) -> list[HeatRow]:
    """One row per host of ``hosts`` (in that order; a host without samples is all None)."""
    bins = cells(start, end)
    return [heat_row(h, series_by_host.get(h, {}), cfg, bins) for h in hosts]


def fleet_idle_gpu_hours(rows: Sequence[HeatRow], gpus: Mapping[str, int],
                         bins: Sequence[Point]) -> list[float]:
    """GPU-hours held idle in each cell across every host (nothing is cut here)."""
    return [sum((r.idle[k] or 0.0) * gpus.get(r.host, 0) * (b1 - b0) / 3600 for r in rows)
            for k, (b0, b1) in enumerate(bins)]
