"""The one place quantities become words, so every message says them the same way.

GiB with one decimal ("75.8 GiB"), durations a person reads at a glance ("4 min",
"2 h 10 min"), rates with their unit ("1.09 samples/s"), absolute times with the zone
("14:05 UTC") and ETAs as both ("~ 14:05 UTC, in 4 h 40 min"). Pure; no I/O.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, tzinfo

MIB_PER_GIB = 1024
BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _finite(value: float | None) -> bool:
    return value is not None and not math.isnan(value) and not math.isinf(value)


def gib(mib: float | None) -> str:
    """MiB (what nvidia-smi reports) as GiB with one decimal: 77600 → ``75.8 GiB``."""
    if mib is None or not _finite(mib):
        return "? GiB"
    return f"{mib / MIB_PER_GIB:.1f} GiB"


def size(n_bytes: float | None) -> str:
    """Bytes in binary units, one decimal above bytes: ``1.2 MiB``, ``3.4 GiB``."""
    if n_bytes is None or not _finite(n_bytes):
        return "?"
    value = max(0.0, float(n_bytes))
    for unit in BINARY_UNITS:
        if value < 1024 or unit == BINARY_UNITS[-1]:
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def duration(seconds: float | None) -> str:
    """``0.4 s``, ``42 s``, ``4 min``, ``2 h 10 min``, ``3 d 4 h``; never a bare ``0s``."""
    if seconds is None or not _finite(seconds):
        return "unknown"
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    minutes = int(s // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def rate(per_s: float | None, unit: str = "samples") -> str:
    """Three significant figures and the unit: ``1.09 samples/s``; unknown says so."""
    if per_s is None or not _finite(per_s) or per_s < 0:
        return f"? {unit}/s"
    if per_s == 0:
        return f"0 {unit}/s"
    digits = max(0, 2 - math.floor(math.log10(per_s)))
    return f"{per_s:,.{digits}f} {unit}/s"


def count(n: int) -> str:
    """Thousands separated: ``18,420``."""
    return f"{n:,}"


def percent(fraction: float) -> str:
    """A fraction as a percentage with one decimal: 0.494 → ``49.4%``."""
    return f"{math.floor(fraction * 1000 + 0.5) / 10:.1f}%"


def clock(ts: float, tz: tzinfo = UTC, now: float | None = None) -> str:
    """An absolute time with its zone: ``14:05 UTC``, with the date when not today."""
    at = datetime.fromtimestamp(ts, tz)
    ref = datetime.fromtimestamp(time.time() if now is None else now, tz)
    zone = at.tzname() or "UTC"
    if at.date() == ref.date():
        return f"{at:%H:%M} {zone}"
    return f"{at:%Y-%m-%d %H:%M} {zone}"


def eta(now: float, remaining_s: float | None, tz: tzinfo = UTC) -> str:
    """When it will be done, as a clock time and a distance: ``~ 14:05 UTC, in 4 h 40 min``."""
    if remaining_s is None or not _finite(remaining_s):
        return "unknown"
    return f"~ {clock(now + remaining_s, tz, now)}, in {duration(remaining_s)}"


def age(now: float, since: float) -> str:
    """How long ago something started: ``4 min``."""
    return duration(max(0.0, now - since))


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun in agreement: ``1 file``, ``3 files``, ``2 dummies``."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
