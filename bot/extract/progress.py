"""Pure progress arithmetic: smoothed rate, ETA and the one-line bar the thread shows.

``render_bar(p)`` gives ``▓▓▓▓▓░░░░░ 49.4% · 18,420/37,312 · 1.09/s · ETA 4h48m``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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


@dataclass(frozen=True)
class RateMeter:
    """Exponentially smoothed rate over wall time (time constant ``tau_s``).

    Weighting by elapsed time, not by update count, keeps the rate honest when
    reports arrive irregularly (a long batch, a paused reporter).
    """

    rate: float | None = None
    last_t: float | None = None
    last_done: int = 0
    tau_s: float = 60.0

    def update(self, t: float, done: int) -> RateMeter:
        if self.last_t is None:
            return RateMeter(None, t, done, self.tau_s)
        dt = t - self.last_t
        if dt <= 0:
            return self
        instant = max(0, done - self.last_done) / dt
        if self.rate is None:
            smoothed = instant
        else:
            alpha = 1.0 - math.exp(-dt / self.tau_s)
            smoothed = self.rate + alpha * (instant - self.rate)
        return RateMeter(smoothed, t, done, self.tau_s)


def eta_seconds(done: int, total: int, rate: float | None) -> float | None:
    if done >= total:
        return 0.0
    if not rate or rate <= 0:
        return None
    return (total - done) / rate


def format_duration(seconds: float | None) -> str:
    """Two most significant units, rounded down: 17332 s -> ``4h48m``."""
    if seconds is None or math.isnan(seconds) or math.isinf(seconds):
        return "?"
    s = max(0, int(seconds))
    days, rem = divmod(s, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def format_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def render_bar(p: Progress, width: int = BAR_WIDTH) -> str:
    filled = min(width, round(p.fraction * width))
    bar = "▓" * filled + "░" * (width - filled)
    pct = math.floor(p.fraction * 1000 + 0.5) / 10
    rate = f"{p.rate:.2f}/s" if p.rate is not None else "–/s"
    eta = "done" if p.done >= p.total > 0 else f"ETA {format_duration(p.eta_s)}"
    return f"{bar} {pct:.1f}% · {p.done:,}/{p.total:,} · {rate} · {eta}"
