"""The digest chart: per host, GPU memory against utilisation, and the disk fill trend.

Headless by construction: a ``Figure`` drawn on ``FigureCanvasAgg`` directly, never
pyplot, so no display, no global figure state, and safe in the scheduler's threads.
Red bands mark time when VRAM was held at ~0 % utilisation: the waste is visible at a
glance.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bot.core import strings
from bot.digest.model import Digest, DigestSettings, Point, Waste, slope_per_s, split_metrics
from bot.digest.render import MAX_WASTE_ROWS, fmt_gpu_minutes, fmt_period

MAX_HOSTS = 8
ROW_HEIGHT_IN = 2.8
MEM_COLOR, UTIL_COLOR, IDLE_COLOR = "#1f77b4", "#2ca02c", "#d62728"


def _dt(ts: float) -> float:
    """Unix time to matplotlib's date number (a float, so the axes stay typed)."""
    return float(mdates.date2num(datetime.fromtimestamp(ts, UTC)))


GpuFields = Mapping[int, Mapping[str, Sequence[Point]]]


def gpu_totals(gpus: GpuFields) -> tuple[list[Point], list[Point]]:
    """Per sample time: total VRAM used (GiB) over all GPUs, and mean utilisation (%)."""
    mem: dict[float, float] = defaultdict(float)
    util: dict[float, list[float]] = defaultdict(list)
    for fields in gpus.values():
        for ts, v in fields.get("mem_used_mib", ()):
            mem[round(ts)] += v / 1024.0
        for ts, v in fields.get("util_pct", ()):
            util[round(ts)].append(v)
    return sorted(mem.items()), sorted((t, sum(vs) / len(vs)) for t, vs in util.items())


def idle_spans(gpus: GpuFields, cfg: DigestSettings) -> list[Point]:
    """``(start, end)`` spans where at least one GPU held VRAM at ~0 % utilisation."""
    idle_at: set[float] = set()
    for fields in gpus.values():
        util = {round(t): v for t, v in fields.get("util_pct", ())}
        for t, used in fields.get("mem_used_mib", ()):
            u = util.get(round(t))
            if used >= cfg.idle_mem_mib and u is not None and u <= cfg.idle_util_pct:
                idle_at.add(round(t))
    times = sorted({round(t) for f in gpus.values() for t, _ in f.get("mem_used_mib", ())})
    spans: list[Point] = []
    for t0, t1 in itertools.pairwise(times):
        if t0 in idle_at:
            end = min(t1, t0 + cfg.max_gap_s)
            if spans and spans[-1][1] == t0:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((t0, end))
    return spans


def _draw_gpu(ax: Axes, host: str, gpus: GpuFields,
              idle_min: float, cfg: DigestSettings) -> None:
    mem, util = gpu_totals(gpus)
    for t0, t1 in idle_spans(gpus, cfg):
        ax.axvspan(_dt(t0), _dt(t1), color=IDLE_COLOR, alpha=0.15, linewidth=0)
    if mem:
        ax.plot([_dt(t) for t, _ in mem], [v for _, v in mem], color=MEM_COLOR, label="VRAM used")
    capacity = sum(f["mem_total_mib"][-1][1] for f in gpus.values() if f.get("mem_total_mib"))
    if capacity:
        ax.axhline(capacity / 1024.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_ylabel("VRAM used (GiB)", color=MEM_COLOR)
    ax.set_ylim(bottom=0)
    twin = ax.twinx()
    if util:
        twin.plot([_dt(t) for t, _ in util], [v for _, v in util], color=UTIL_COLOR, label="util")
    twin.set_ylim(0, 105)
    twin.set_ylabel("utilisation (%)", color=UTIL_COLOR)
    waste = f" — VRAM held idle {fmt_gpu_minutes(idle_min)}" if idle_min >= 1 else ""
    ax.set_title(f"{host}: {len(gpus)} GPUs{waste}", loc="left", fontsize=10,
                 color=IDLE_COLOR if waste else "black")
    if not mem and not util:
        ax.text(0.5, 0.5, "no GPU samples", transform=ax.transAxes, ha="center", va="center")


def _draw_disk(ax: Axes, disks: Mapping[str, Mapping[str, Sequence[Point]]], end: float) -> None:
    for mount, fields in sorted(disks.items()):
        used, sizes = list(fields.get("used_bytes", ())), fields.get("size_bytes", ())
        if not used or not sizes or sizes[-1][1] <= 0:
            continue
        size = sizes[-1][1]
        pct = [(t, 100.0 * v / size) for t, v in used]
        line = ax.plot([_dt(t) for t, _ in pct], [v for _, v in pct], label=mount)[0]
        slope = slope_per_s(pct)
        if slope is not None and slope > 0:
            t_last, v_last = pct[-1]
            horizon = min(end + (end - used[0][0]) * 0.25, t_last + (100.0 - v_last) / slope)
            ax.plot([_dt(t_last), _dt(horizon)], [v_last, v_last + slope * (horizon - t_last)],
                    linestyle="--", color=line.get_color())
    ax.axhline(100.0, color=IDLE_COLOR, linewidth=0.8, linestyle=":")
    ax.set_ylim(0, 105)
    ax.set_ylabel("disk used (%)")
    ax.set_title("disk fill (dashed: trend)", loc="left", fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=8)


def draw_waste(by_host: Axes, by_unit: Axes, waste: Waste) -> None:
    """Wasted GPU-hours as horizontal bars, worst first: per host, and per holding unit;
    the title says "N of M shown" when there are more than ``MAX_WASTE_ROWS``."""
    for ax, values, what in ((by_host, waste.by_host, "host"), (by_unit, waste.by_unit, "unit")):
        ranked = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
        top = ranked[:MAX_WASTE_ROWS][::-1]
        bars = ax.barh([k for k, _ in top], [v for _, v in top], color=IDLE_COLOR, alpha=0.7)
        ax.bar_label(bars, labels=[f"{v:.1f}" for _, v in top], padding=3, fontsize=8)
        cut = (" " + strings.SHOWN_OF.format(shown=len(top), total=len(ranked))
               if len(ranked) > len(top) else "")
        ax.set_title(strings.CHART_WASTE_TITLE.format(what=what, cut=cut), loc="left",
                     fontsize=10)
        ax.set_xlabel("GPU-hours (VRAM held at ~0% utilisation)")
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlim(0, max((v for _, v in top), default=1.0) * 1.2)


def render_chart(digest: Digest, series_by_host: Mapping[str, Mapping[str, Sequence[Point]]],
                 path: Path, cfg: DigestSettings | None = None, dpi: int = 100) -> Path:
    """Draw the digest's hosts (most in need of a person first, at most ``MAX_HOSTS``)
    to a PNG; ``bot.digest.fleet_chart.digest_chart`` picks this one for small fleets."""
    cfg = cfg or DigestSettings()
    hosts = [h for h in digest.hosts if h.host in series_by_host][:MAX_HOSTS]
    top = 1 if digest.waste.total > 0 else 0  # a last row of wasted GPU-hours bars
    rows = max(1, len(hosts) + top)
    fig = Figure(figsize=(13, ROW_HEIGHT_IN * rows + 0.8), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, 2, squeeze=False, width_ratios=(2.2, 1))
    fig.suptitle(f"GPU memory vs utilisation, disk fill — {fmt_period(digest.start, digest.end)}")
    if top:
        draw_waste(axes[-1][0], axes[-1][1], digest.waste)
    for row, h in enumerate(hosts):
        gpus, disks = split_metrics(series_by_host[h.host])
        _draw_gpu(axes[row][0], h.host, gpus, h.idle_gpu_minutes, cfg)
        _draw_disk(axes[row][1], disks, digest.end)
        span = digest.end - digest.start
        for ax, right, ticks in ((axes[row][0], digest.end, 9),
                                 (axes[row][1], digest.end + 0.25 * span, 4)):
            ax.set_xlim(_dt(digest.start), _dt(right))
            locator = mdates.AutoDateLocator(maxticks=ticks)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
            ax.grid(alpha=0.3)
    if not hosts and not top:
        axes[0][0].text(0.5, 0.5, "no samples in this period", ha="center", va="center")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
