"""Pure progress display: the bar, the line and the closing line the bot shows for a job.

``render_bar(p)`` gives ``▓▓▓▓▓░░░░░ 49.4% · 18,420/37,312 · 1.09 samples/s · ETA in 4 h 48 min``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bot.core import fmt, strings
from bot.domain.jobs import eta_seconds

BAR_WIDTH = 10


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    rate: float | None = None  # samples per second, smoothed
    eta_s: float | None = None

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0


def render_bar(p: Progress, width: int = BAR_WIDTH) -> str:
    filled = min(width, round(p.fraction * width))
    bar = "▓" * filled + "░" * (width - filled)
    pct = math.floor(p.fraction * 1000 + 0.5) / 10
    eta = "done" if p.done >= p.total > 0 else (
        f"ETA in {fmt.duration(p.eta_s)}" if p.eta_s is not None else "ETA measuring…")
    return f"{bar} {pct:.1f}% · {p.done:,}/{p.total:,} · {fmt.rate(p.rate)} · {eta}"


# --- the thread's progress message (issue 15): moving average, absolute ETA -----------

MIN_SAMPLES = 3  # fewer than this, or a shorter span, shows "measuring…"
MIN_SPAN_S = 10.0
WINDOW_SAMPLES = 12
WINDOW_AGE_S = 600.0


@dataclass(frozen=True)
class RateWindow:
    """The last few ``(time, done)`` observations; the rate is their moving average.

    A plain average over a window (done now minus done then, over the time between) is
    what a person checks by hand, and a stall shows within one window. A count that goes
    back (a restart recounted its files) starts the window again.
    """

    samples: tuple[tuple[float, int], ...] = ()

    def add(self, t: float, done: int) -> RateWindow:
        if self.samples and t <= self.samples[-1][0]:
            return self
        if self.samples and done < self.samples[-1][1]:
            return RateWindow(((t, done),))
        kept = [s for s in self.samples if t - s[0] <= WINDOW_AGE_S][-(WINDOW_SAMPLES - 1):]
        return RateWindow((*kept, (t, done)))

    def rate(self) -> float | None:
        """Samples per second over the window; None while still measuring."""
        if len(self.samples) < MIN_SAMPLES:
            return None
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 - t0 >= MIN_SPAN_S else None

    def to_list(self) -> list[list[float]]:
        return [[t, d] for t, d in self.samples]

    @classmethod
    def from_list(cls, raw: object) -> RateWindow:
        if not isinstance(raw, list):
            return cls()
        pairs = [(float(p[0]), int(p[1])) for p in raw
                 if isinstance(p, list | tuple) and len(p) == 2]
        return cls(tuple(pairs))


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    fraction = Progress(done, total).fraction
    filled = min(width, round(fraction * width))
    return "▓" * filled + "░" * (width - filled)


def progress_line(done: int, total: int, rate: float | None, now: float,
                  moving: bool = True) -> str:
    """``▓▓▓▓▓░░░░░ 49.0% · 18,283/37,312 · 1.09 samples/s · done ~ 14:05 UTC, in 4 h``."""
    shown = {"bar": bar(done, total), "pct": fmt.percent(Progress(done, total).fraction),
             "done": fmt.count(done), "total": fmt.count(total)}
    if not moving:  # queued, paused, finished: no rate to measure
        return strings.MSG_PROGRESS_STILL_LINE.format(**shown)
    if rate is None:
        return strings.MSG_PROGRESS_MEASURING_LINE.format(**shown)
    remaining = eta_seconds(done, total, rate)
    return strings.MSG_PROGRESS_LINE.format(
        **shown, rate=fmt.rate(rate), eta=fmt.eta(now, remaining))


@dataclass(frozen=True)
class RunTotals:
    """What the closing line reports; every count comes from the job's one ``done``."""

    label: str
    state: str
    done: int
    total: int
    resumed_from: int
    skipped: int
    repaired: int
    counted_from: int  # ``done`` at ``started_at``: the mean rate is over that span
    started_at: float
    finished_at: float
    repair_note: str = ""  # "1 partial file removed, 1 corrupt file recomputed"


def finished_line(r: RunTotals) -> str:
    """``job: completed 37,312/37,312 in 4 h 40 min · mean 1.09 samples/s · …``."""
    seconds = max(0.0, r.finished_at - r.started_at)
    written = max(0, r.done - r.resumed_from)
    mean = max(0, r.done - r.counted_from) / seconds if seconds > 0 else None
    return strings.MSG_PROGRESS_FINISHED.format(
        name=r.label, state=r.state, done=fmt.count(r.done), total=fmt.count(r.total),
        duration=fmt.duration(seconds), rate=fmt.rate(mean), written=fmt.count(written),
        skipped=fmt.count(r.skipped), repaired=fmt.count(r.repaired)) + (
        f" ({r.repair_note})" if r.repair_note else "")
