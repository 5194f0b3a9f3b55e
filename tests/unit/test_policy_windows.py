"""Weekly windows: days, ranges, past midnight, time zones and DST, and refusals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.windows import WindowError, parse_days, parse_period, parse_window

BERLIN = ZoneInfo("Europe/Berlin")


def ts(y: int, mo: int, d: int, h: int, mi: int = 0, tz: ZoneInfo | None = None) -> float:
    return datetime(y, mo, d, h, mi, tzinfo=tz or UTC).timestamp()


@pytest.mark.parametrize(("text", "days"), [
    ("Mon", {0}), ("Mon-Fri", {0, 1, 2, 3, 4}), ("Sat,Sun", {5, 6}), ("Fri-Mon", {4, 5, 6, 0}),
    ("daily", set(range(7))), ("monday", {0}), ("Mon,Wed-Thu", {0, 2, 3}), ("Sun-Sun", {6}),
])
def test_days(text: str, days: set[int]) -> None:
    assert parse_days(text) == frozenset(days)


@pytest.mark.parametrize("bad", [
    "Mon 09:00", "Mo 09:00-10:00 UTC", "Mon 9-10 UTC", "Mon 09:00-09:00 UTC",
    "Mon 25:00-26:00 UTC", "Mon 09:00-18:00 Mars/Base", "Mon 09:00-18:00 ../etc/passwd",
    "Mon 09:00-18:00 UTC extra", "Monx 09:00-10:00", "Mon 24:00-02:00 UTC", "",
])
def test_bad_specs_name_the_part(bad: str) -> None:
    with pytest.raises(WindowError):
        parse_window(bad)


def test_office_hours_in_berlin_follow_the_wall_clock_across_dst() -> None:
    w = parse_window("Mon-Fri 09:00-18:00 Europe/Berlin")
    # Wed 2026-01-14 (CET, UTC+1) and Wed 2026-07-15 (CEST, UTC+2), 09:30 local both times
    assert w.contains(ts(2026, 1, 14, 9, 30, BERLIN))
    assert w.contains(ts(2026, 7, 15, 9, 30, BERLIN))
    assert not w.contains(ts(2026, 7, 15, 8, 59, BERLIN))
    assert w.contains(ts(2026, 7, 15, 17, 59, BERLIN))
    assert not w.contains(ts(2026, 7, 15, 18, 0, BERLIN))  # end is out
    assert not w.contains(ts(2026, 7, 18, 10, 0, BERLIN))  # Saturday
    assert w.contains(ts(2026, 7, 15, 7, 30))  # 07:30 UTC is 09:30 in Berlin in summer


def test_a_window_past_midnight_belongs_to_the_day_it_starts() -> None:
    w = parse_window("Sat 22:00-02:00 UTC")
    assert w.contains(ts(2026, 7, 18, 23, 0))  # Saturday night
    assert w.contains(ts(2026, 7, 19, 1, 59))  # Sunday small hours
    assert not w.contains(ts(2026, 7, 19, 2, 0))
    assert not w.contains(ts(2026, 7, 19, 23, 0))  # Sunday night: not a start day
    assert not w.contains(ts(2026, 7, 18, 1, 0))  # Saturday small hours: Friday did not start


def test_zone_defaults_to_utc_and_24_00_ends_the_day() -> None:
    w = parse_window("Sun 12:00-24:00")
    assert w.zone == "UTC" and w.text == "Sun 12:00-24:00"
    assert w.contains(ts(2026, 7, 19, 23, 59)) and not w.contains(ts(2026, 7, 20, 0, 0))


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("15m", 900), ("1h", 3600),
                                               ("7d", 604800), ("1.5h", 5400),
                                               ("1w", 604800), ("1 hour", 3600)])
def test_periods(text: str, seconds: float) -> None:
    assert parse_period(text) == seconds


@pytest.mark.parametrize("bad", ["", "0h", "h", "-1h", "90", "10:00"])
def test_bad_periods(bad: str) -> None:
    with pytest.raises(WindowError):
        parse_period(bad)


@given(st.integers(0, 6), st.integers(0, 23), st.integers(0, 59), st.integers(1, 600),
       st.integers(0, 7 * 24 * 60 - 1))
def test_contains_agrees_with_a_minute_walk(day: int, h: int, m: int, length: int,
                                            offset: int) -> None:
    """A window of ``length`` minutes from (day, h:m) in UTC contains exactly the minutes
    a plain walk from its start covers (midnight crossing included)."""
    start = h * 60 + m
    end = (start + length) % 1440 or 1440
    if end == start:
        return
    names = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    w = parse_window(f"{names[day]} {h:02}:{m:02}-{end // 60:02}:{end % 60:02} UTC")
    monday = datetime(2026, 7, 13, tzinfo=UTC)  # a Monday
    probe = monday + timedelta(minutes=offset)
    start_at = monday + timedelta(days=day, minutes=start)
    span = (end - start) % 1440 or 1440
    inside = any(start_at + timedelta(weeks=k) <= probe < start_at + timedelta(weeks=k,
                 minutes=span) for k in (-1, 0))
    assert w.contains(probe.timestamp()) is inside
