"""One duration grammar (``bot/domain/durations.py``, pytimeparse underneath) for the
three places a person types one: ``/ir silence|snooze|stats``, ``incident-bot silence add
--for`` and a policy's ``limit.per`` / ``policy replay --since``."""

from __future__ import annotations

import pytest

from bot.chat.slash import parse_duration as slash_duration
from bot.commands.incidents import parse_duration as cli_duration
from bot.core.errors import UserError
from bot.domain.durations import DurationError, parse_duration
from bot.domain.windows import WindowError, parse_period

GOOD = {"90s": 90, "30m": 1800, "2h": 7200, "1d": 86400, "1h30m": 5400, "1.5h": 5400,
        "30 min": 1800, "1w": 604800, " 2H ": 7200}
BAD = ["", "abc", "90", "10:00", "0s", "-5m", "h", "1e3s", "30 parsecs"]


@pytest.mark.parametrize(("text", "seconds"), GOOD.items())
def test_every_caller_reads_the_same_seconds(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds
    assert parse_period(text) == seconds
    assert cli_duration(text) == seconds
    assert slash_duration(text, most_s=10**7) == seconds


@pytest.mark.parametrize("text", BAD)
def test_every_caller_refuses_the_same_text(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)
    with pytest.raises(WindowError):
        parse_period(text)
    with pytest.raises(UserError) as err:
        cli_duration(text)
    assert err.value.exit_code == 2
    with pytest.raises(ValueError, match=r"30m, 2h or 1d|at least 1s"):
        slash_duration(text)


def test_the_slash_bound_still_applies() -> None:
    with pytest.raises(ValueError, match="at most 30 days"):
        slash_duration("400d", most_s=30 * 86400)
