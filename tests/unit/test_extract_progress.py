"""Progress arithmetic: the bar the thread shows, smoothing, ETA, durations."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.jobs import eta_seconds
from bot.extract.reporter import RateMeter
from bot.jobs.progress import Progress, render_bar


def test_render_bar_matches_the_story_example() -> None:
    eta = eta_seconds(18_420, 37_312, 1.09)
    bar = render_bar(Progress(18_420, 37_312, 1.09, eta))
    assert bar == "▓▓▓▓▓░░░░░ 49.4% · 18,420/37,312 · 1.09 samples/s · ETA in 4 h 48 min"


def test_render_bar_edges() -> None:
    assert render_bar(Progress(0, 10)) == "░░░░░░░░░░ 0.0% · 0/10 · ? samples/s · ETA measuring…"
    assert render_bar(Progress(10, 10, 2.0, 0)).endswith("100.0% · 10/10 · 2.00 samples/s · done")
    assert render_bar(Progress(0, 0)).startswith("░░░░░░░░░░ 0.0%")


@given(st.integers(0, 10**6), st.integers(1, 10**6))
def test_bar_width_and_percent_are_consistent(done: int, total: int) -> None:
    done = min(done, total)
    bar = render_bar(Progress(done, total))
    assert len(bar.split(" ")[0]) == 10
    assert float(bar.split(" ")[1].rstrip("%")) == math.floor(done / total * 1000 + 0.5) / 10


def test_rate_meter_first_interval_then_smooths_by_time() -> None:
    m = RateMeter(tau_s=10).update(0.0, 0)
    assert m.rate is None
    m = m.update(1.0, 10)
    assert m.rate == 10.0
    m2 = m.update(2.0, 10)  # a stall pulls the rate down, but only partly
    assert 0 < m2.rate < 10.0  # type: ignore[operator]
    assert math.isclose(m2.rate or 0, 10 * math.exp(-0.1), rel_tol=1e-9)
    assert m2.update(2.0, 99) is m2  # no time passed: unchanged


def test_eta() -> None:
    assert eta_seconds(5, 10, 1.0) == 5.0
    assert eta_seconds(10, 10, None) == 0.0
    assert eta_seconds(5, 10, None) is None
    assert eta_seconds(5, 10, 0.0) is None


def test_rate_window_is_a_moving_average_that_restarts_on_a_recount() -> None:
    from bot.jobs.progress import RateWindow

    w = RateWindow().add(0, 0).add(5, 10)
    assert w.rate() is None  # two samples: still measuring
    w = w.add(10, 20)
    assert w.rate() == 2.0
    for t in range(20, 200, 10):
        w = w.add(t, 20 + (t - 10))  # 1 per second from here on
    assert w.rate() == 1.0, "old fast samples have left the window"
    assert w.add(200, 5).samples == ((200, 5),)
    assert RateWindow.from_list(w.to_list()) == w


def test_progress_line_and_finished_line() -> None:
    from bot.jobs.progress import RunTotals, finished_line, progress_line

    noon = 1_764_590_400.0
    line = progress_line(18_283, 37_312, 1.09, noon)
    assert line == ("▓▓▓▓▓░░░░░ 49.0% · 18,283/37,312 · 1.09 samples/s · "
                    "done ~ 16:50 UTC, in 4 h 50 min")
    totals = RunTotals("kimi", "completed", 37_312, 37_312, 18_283, 0, 2, 18_283,
                       noon, noon + 4 * 3600 + 40 * 60)
    assert finished_line(totals) == ("kimi: completed 37,312/37,312 in 4 h 40 min · "
                                     "mean 1.13 samples/s · 19,029 written, 0 skipped, "
                                     "2 repaired")
