"""The App Home while Redis is down or refusing (issue 39's chaos run logged 30 tracebacks
of "refreshing the App Home failed" while Redis was down): a refusal is a warning and a
count in ``redis_refusals_total{where="home"}``, redrawn on the next change or tick; any
other failure is still logged as ours, with its traceback."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any, cast

import pytest
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from bot.chat.home import Fleet
from bot.chat.home_tab import HomePublisher, HomeRefresher, _opened
from bot.core import metrics
from storage.home import HomeViewers


def closed_port() -> int:
    """A loopback port nothing listens on: the real client's connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def publisher(source: Any = lambda: Fleet(0.0)) -> HomePublisher:
    redis = Redis(port=closed_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    return HomePublisher(cast(Any, None), source, HomeViewers(redis, "T0001"))


def refusals() -> float:
    return metrics.REDIS_REFUSALS.labels(reason="connection", where="home")._value.get()


def refresh_once(home: HomePublisher, caplog: pytest.LogCaptureFixture) -> None:
    """One poke of the refresher's own thread, until it has said how the refresh went."""
    refresher = HomeRefresher(home, min_interval_s=60.0, idle_s=60.0)
    refresher.poke()
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and not [
            r for r in caplog.records if "refreshing the App Home" in r.getMessage()]:
        time.sleep(0.02)
    refresher.close()


def test_a_home_refresh_redis_refused_is_a_warning_and_a_count(
        caplog: pytest.LogCaptureFixture) -> None:
    before = refusals()
    with caplog.at_level(logging.WARNING, logger="bot.chat.home_tab"):
        refresh_once(publisher(), caplog)
    said = [r for r in caplog.records if "refreshing the App Home failed" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "Redis unavailable (connection)" in said[0].getMessage()
    assert said[0].exc_info is None
    assert refusals() == before + 1


def test_a_home_publish_redis_refused_is_a_warning_too(
        caplog: pytest.LogCaptureFixture) -> None:
    before = refusals()
    with caplog.at_level(logging.WARNING, logger="bot.chat.home_tab"):
        _opened(publisher(), "UALICE", None)
    said = [r for r in caplog.records if "App Home for UALICE failed" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert refusals() == before + 1


def test_any_other_home_failure_is_still_an_error_with_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> Fleet:
        raise ValueError("a bug of ours")

    before = refusals()
    with caplog.at_level(logging.WARNING, logger="bot.chat.home_tab"):
        refresh_once(publisher(broken), caplog)
    said = [r for r in caplog.records if "refreshing the App Home failed" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.ERROR and said[0].exc_info
    assert refusals() == before
