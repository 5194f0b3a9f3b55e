"""Recurring weekly windows ("Mon-Fri 09:00-18:00 Europe/Berlin"), pure.

Two features read the same grammar: a policy's ``not_during`` (no automatic action in
office hours, say) and maintenance windows (alerts recorded, not posted). A window is
days of the week, a local start and end time and an IANA zone; the wall clock of that
zone decides, so a window stays 09:00-18:00 across daylight-saving changes. An end
before the start runs past midnight into the next day ("Sat 22:00-02:00 UTC").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.domain.durations import DurationError, parse_duration

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME = re.compile(r"^([01]?\d|2[0-4]):([0-5]\d)$")
MINUTES_PER_DAY = 24 * 60


class WindowError(ValueError):
    """A window or period spec that cannot be read; the message says which part."""


@dataclass(frozen=True)
class WeeklyWindow:
    """Days (0 = Monday) on which the window starts, minutes after local midnight."""

    days: frozenset[int]
    start_min: int
    end_min: int
    zone: str
    text: str  # the spec as written, for messages

    def contains(self, ts: float) -> bool:
        """Whether the Unix time ``ts`` falls inside the window (start in, end out)."""
        local = datetime.fromtimestamp(ts, ZoneInfo(self.zone))
        day, minute = local.weekday(), local.hour * 60 + local.minute
        if self.start_min < self.end_min:
            return day in self.days and self.start_min <= minute < self.end_min
        started_today = day in self.days and minute >= self.start_min
        started_yesterday = (day - 1) % 7 in self.days and minute < self.end_min
        return started_today or started_yesterday


def parse_window(text: str) -> WeeklyWindow:
    """``DAYS HH:MM-HH:MM [ZONE]``; DAYS is ``Mon``, ``Mon-Fri``, ``Sat,Sun`` or ``daily``.

    The zone defaults to UTC. Raises ``WindowError`` naming the part it could not read.
    """
    parts = text.split()
    if len(parts) not in (2, 3):
        raise WindowError(f"{text!r}: expected 'DAYS HH:MM-HH:MM ZONE', "
                          "e.g. 'Mon-Fri 09:00-18:00 Europe/Berlin'")
    days = parse_days(parts[0])
    start, end = _times(parts[1])
    zone = parts[2] if len(parts) == 3 else "UTC"
    _check_zone(zone)
    return WeeklyWindow(days, start, end, zone, " ".join(parts))


def parse_days(text: str) -> frozenset[int]:
    """``daily``, one day, a range (wrapping: ``Fri-Mon``) or a comma list of those."""
    if text.lower() in ("daily", "*"):
        return frozenset(range(7))
    days: set[int] = set()
    for item in text.lower().split(","):
        first, _, last = item.partition("-")
        a, b = _day(first), _day(last or first)
        days.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(days)


def _day(name: str) -> int:
    key = name.strip()[:3]
    if key not in DAYS or len(name.strip()) not in (3, len(_FULL.get(key, ""))):
        raise WindowError(f"unknown day {name!r}; use Mon, Tue, Wed, Thu, Fri, Sat, Sun")
    return DAYS.index(key)


_FULL = {"mon": "monday", "tue": "tuesday", "wed": "wednesday", "thu": "thursday",
         "fri": "friday", "sat": "saturday", "sun": "sunday"}


def _times(text: str) -> tuple[int, int]:
    first, sep, last = text.partition("-")
    if not sep:
        raise WindowError(f"{text!r}: expected a time range like 09:00-18:00")
    start, end = _minute(first), _minute(last)
    if start == end:
        raise WindowError(f"{text!r}: start and end are the same time")
    if start == MINUTES_PER_DAY:
        raise WindowError(f"{text!r}: a window cannot start at 24:00")
    return start, end


def _minute(text: str) -> int:
    match = _TIME.match(text.strip())
    if not match:
        raise WindowError(f"{text!r}: expected a time HH:MM")
    minute = int(match.group(1)) * 60 + int(match.group(2))
    if minute > MINUTES_PER_DAY:
        raise WindowError(f"{text!r}: past 24:00")
    return minute


def _check_zone(zone: str) -> None:
    if zone.startswith("/") or ".." in zone:
        raise WindowError(f"unknown time zone {zone!r}")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise WindowError(f"unknown time zone {zone!r}; use an IANA name like "
                          "Europe/Berlin or UTC") from None


def parse_period(text: str) -> float:
    """``90s``, ``15m``, ``1h``, ``7d`` → seconds (positive): the one duration grammar
    (``bot/domain/durations.py``), its error as a ``WindowError``."""
    try:
        return parse_duration(text)
    except DurationError as exc:
        if exc.not_positive:
            raise WindowError(f"{text!r}: a period must be longer than 0 s") from None
        raise WindowError(f"{text!r} is not a period: use e.g. 30m, 1h or 7d") from None
