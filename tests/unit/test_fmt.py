"""One way to say quantities: GiB, durations, rates, clock times with the zone, ETAs."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from bot.core import fmt

NOON = 1_764_590_400.0  # 2025-12-01 12:00:00 UTC


@pytest.mark.parametrize(("mib", "shown"), [(77_600, "75.8 GiB"), (0, "0.0 GiB"),
                                            (None, "? GiB"), (620_800, "606.2 GiB")])
def test_gib(mib: float | None, shown: str) -> None:
    assert fmt.gib(mib) == shown


@pytest.mark.parametrize(("secs", "shown"), [
    (0.4, "0.4 s"), (42, "42 s"), (240, "4 min"), (7800, "2 h 10 min"), (7200, "2 h"),
    (16_800, "4 h 40 min"), (273_600, "3 d 4 h"), (None, "unknown"), (float("nan"), "unknown"),
])
def test_duration(secs: float | None, shown: str) -> None:
    assert fmt.duration(secs) == shown


@pytest.mark.parametrize(("per_s", "shown"), [
    (1.0934, "1.09 samples/s"), (12.34, "12.3 samples/s"), (1234.5, "1,234 samples/s"),
    (0.0123, "0.0123 samples/s"), (0, "0 samples/s"), (None, "? samples/s"),
])
def test_rate(per_s: float | None, shown: str) -> None:
    assert fmt.rate(per_s) == shown


def test_size_is_binary_with_one_decimal() -> None:
    assert [fmt.size(n) for n in (512, 1536, 3 * 1024**3)] == ["512 B", "1.5 KiB", "3.0 GiB"]


def test_clock_and_eta_carry_the_zone() -> None:
    assert fmt.clock(NOON + 2 * 3600 + 300, now=NOON) == "14:05 UTC"
    assert fmt.clock(NOON + 86_400, now=NOON) == "2025-12-02 12:00 UTC"
    assert fmt.eta(NOON, 2 * 3600 + 300) == "~ 14:05 UTC, in 2 h 5 min"
    cet = timezone(timedelta(hours=1), "CET")
    assert fmt.eta(NOON, 4 * 3600 + 40 * 60, cet) == "~ 17:40 CET, in 4 h 40 min"
    assert fmt.eta(NOON, None) == "unknown"
