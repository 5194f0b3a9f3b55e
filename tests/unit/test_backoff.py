"""The one backoff rule (bot/domain/backoff.py), as the chat outbox, paging and the agent
use it: exponential, capped, and a server's Retry-After wins."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from bot.agent.runner import BACKOFF as AGENT
from bot.domain.backoff import Backoff, retry_after_s
from bot.domain.paging import backoff_s as paging_backoff
from bot.domain.paging import retry_after_s as paging_retry_after


def test_exponential_then_capped() -> None:
    rule = Backoff(2.0, 300.0)
    assert [rule.after(n) for n in range(1, 11)] == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]
    assert rule.after(0) == 2.0  # never less than the base


def test_paging_and_the_agent_use_it() -> None:
    assert [paging_backoff(n) for n in (1, 2, 3, 10)] == [2, 4, 8, 300]
    assert [AGENT.after(n) for n in (1, 2, 3, 20)] == [1, 2, 4, 300]


@pytest.mark.parametrize(("header", "expected"), [("7", 7.0), ("0", 0.0), ("1.5", 1.5),
                                                  (None, 4.0), ("", 4.0), ("soon", 4.0),
                                                  ("-3", 4.0), ("9999", 300.0)])
def test_retry_after_wins_when_usable(header: str | None, expected: float) -> None:
    assert paging_retry_after(header, 2) == expected


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    later = format_datetime(datetime(2026, 1, 2, 3, 4, 35, tzinfo=UTC), usegmt=True)
    assert retry_after_s(later, now) == 30.0
    assert retry_after_s(later) is None  # a date needs the caller's clock
