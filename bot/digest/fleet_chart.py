"""The digest chart for a fleet (more hosts than ``charts.MAX_HOSTS``; issue 37).

Per-host lines stop being readable past a handful of hosts. Here:

- a strip over *every* host: GPU-hours held idle in each hour, and how many hosts had a
  disk at least ``FULL_PCT`` full (nothing is cut from this row);
- two host × hour heatmaps side by side, rows in the digest's order (most in need of a
  person first, ``bot.domain.fleet_needs``): the share of each hour's GPU time held idle,
  and the fullest disk's fill. At most ``MAX_ROWS`` rows, and the title says "N of M
  hosts shown" when there are more; the digest's text ranks the rest;
- the wasted GPU-hours bars by host and by unit (``charts._draw_waste``).

Headless like ``bot.digest.charts``: a ``Figure`` on ``FigureCanvasAgg``, never pyplot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from bot.chat.needs_view import short_reason
from bot.core import strings
from bot.digest.charts import IDLE_COLOR, MAX_HOSTS, draw_waste, render_chart
from bot.digest.heat import HeatRow, cells, fleet_idle_gpu_hours, heat_rows
from bot.digest.model import Digest, DigestSettings, Point
from bot.digest.render import fmt_period

MAX_ROWS = 100
FULL_PCT = 90.0
ROW_IN = 0.15
NO_DATA = "#d9d9d9"


def digest_chart(digest: Digest, series_by_host: Mapping[str, Mapping[str, Sequence[Point]]],
                 path: Path, cfg: DigestSettings | None = None, dpi: int = 100) -> Path:
    """The digest's chart: lines per host up to ``MAX_HOSTS`` hosts, the fleet's
    heatmaps beyond."""
    if len(digest.hosts) <= MAX_HOSTS:
        return render_chart(digest, series_by_host, path, cfg, dpi)
    return render_fleet_chart(digest, series_by_host, path, cfg, dpi)


def render_fleet_chart(digest: Digest, series_by_host: Mapping[str, Mapping[str, Sequence[Point]]],
                       path: Path, cfg: DigestSettings | None = None, dpi: int = 100) -> Path:
    cfg = cfg or DigestSettings()
    rows = heat_rows(series_by_host, [h.host for h in digest.hosts], cfg, digest.start,
                     digest.end)
    bins = cells(digest.start, digest.end)
    hosts, cut = chart_rows(digest)
    shown = rows[:len(hosts)]
    top = 1 if digest.waste.total > 0 else 0
    heat_in = max(2.5, ROW_IN * len(shown) + 1.4)
    fig = Figure(figsize=(13, 2.4 + heat_in + 2.8 * top + 0.8), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2 + top, 2, height_ratios=[2.4, heat_in] + [2.8] * top,
                            width_ratios=(1, 1))
    fig.suptitle(strings.CHART_FLEET_TITLE.format(hosts=len(rows),
                                                  period=fmt_period(digest.start, digest.end)))
    gpus = {h.host: len(h.gpus) for h in digest.hosts}
    _draw_fleet(fig.add_subplot(grid[0, :]), rows, gpus, bins)
    tags = {n.host: short_reason(n.reasons[0]) for n in digest.needs}
    labels = [_label(r.host, tags.get(r.host, "")) for r in shown]
    needing = sum(1 for r in shown if r.host in tags)
    _draw_heat(fig.add_subplot(grid[1, 0]), shown, "idle", bins, labels, needing,
               strings.CHART_HEAT_IDLE.format(cut=cut))
    _draw_heat(fig.add_subplot(grid[1, 1]), shown, "disk", bins, labels, needing,
               strings.CHART_HEAT_DISK.format(cut=cut))
    if top:
        draw_waste(fig.add_subplot(grid[2, 0]), fig.add_subplot(grid[2, 1]), digest.waste)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def chart_rows(digest: Digest) -> tuple[list[str], str]:
    """The heatmaps' rows (the digest's order: most in need of a person first), and the
    words that say how many of the hosts they are."""
    order = [h.host for h in digest.hosts]
    shown = order[:MAX_ROWS]
    return shown, strings.CHART_ROWS_SHOWN.format(shown=len(shown), total=len(order))


def _hour_labels(bins: Sequence[Point]) -> list[str]:
    from datetime import UTC, datetime

    return [datetime.fromtimestamp(b0, UTC).strftime("%H") for b0, _ in bins]


def _draw_fleet(ax: Axes, rows: Sequence[HeatRow], gpus: Mapping[str, int],
                bins: Sequence[Point]) -> None:
    """Every host, summed: idle GPU-hours per cell (bars), hosts with a full disk (line)."""
    idle = fleet_idle_gpu_hours(rows, gpus, bins)
    x = np.arange(len(bins))
    ax.bar(x, idle, color=IDLE_COLOR, alpha=0.7, width=0.9)
    ax.set_ylabel("GPU-h held idle")
    ax.set_xticks(x, _hour_labels(bins), fontsize=7)
    ax.set_xlim(-0.5, len(bins) - 0.5)
    ax.set_title(strings.CHART_FLEET_ROW.format(hosts=len(rows), pct=f"{FULL_PCT:.0f}"),
                 loc="left", fontsize=10)
    twin = ax.twinx()
    full = [sum(1 for r in rows if (r.disk[k] or 0.0) >= FULL_PCT) for k in range(len(bins))]
    twin.plot(x, full, color="#8c564b", marker=".", linewidth=1.2)
    twin.set_ylabel(f"hosts with a disk ≥ {FULL_PCT:.0f}%", color="#8c564b")
    twin.set_ylim(0, max([*full, 1]) * 1.2)
    ax.grid(alpha=0.3, axis="y")


def _draw_heat(ax: Axes, rows: Sequence[HeatRow], which: str, bins: Sequence[Point],
               labels: Sequence[str], needing: int, title: str) -> None:
    """Rows top down in the digest's order; a line under the last host that needs a
    person, whose label names its most urgent reason."""
    values = np.array([[np.nan if v is None else v for v in getattr(r, which)] for r in rows]
                      or [[np.nan] * len(bins)], dtype=float)
    cmap = ListedColormap(_ramp(which)).with_extremes(bad=NO_DATA)
    image = ax.imshow(np.ma.masked_invalid(values), aspect="auto", interpolation="nearest",
                      cmap=cmap, vmin=0.0, vmax=1.0 if which == "idle" else 100.0)
    ax.set_yticks(range(len(rows)), list(labels), fontsize=8 if len(rows) <= 40 else 6)
    if 0 < needing < len(rows):
        ax.axhline(needing - 0.5, color="black", linewidth=1.2)
    ax.set_xticks(range(len(bins)), _hour_labels(bins), fontsize=7)
    ax.set_xlabel("hour (UTC)")
    ax.set_title(title, loc="left", fontsize=10)
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.01)
    bar.ax.tick_params(labelsize=7)
    bar.set_label("share of GPU time" if which == "idle" else "% used", fontsize=8)


def _ramp(which: str) -> list[str]:
    """White to red (idle) or white to brown (disk), so no data (grey) stands apart."""
    end = (0xd6, 0x27, 0x28) if which == "idle" else (0x8c, 0x56, 0x4b)
    steps = 64
    return ["#" + "".join(f"{round(255 + (c - 255) * k / (steps - 1)):02x}" for c in end)
            for k in range(steps)]


def _label(host: str, tag: str) -> str:
    name = host if len(host) <= 24 else host[:23] + "…"
    return f"{name} · {tag}" if tag else name
