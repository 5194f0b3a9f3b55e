"""Which errors are Redis saying "not now" (issue 39): the edges answer 503 for them and the
flow re-drives what they interrupted; anything else stays a bug of ours (a 500, an id).
The real server's refusals are in tests/integration/test_redis_refusals.py."""

from __future__ import annotations

import pytest
from redis.exceptions import (
    BusyLoadingError,
    ConnectionError,
    ExecAbortError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
    WatchError,
)

from storage.connection import lost_while_watching, refusal
from storage.incidents import Contention

PIPELINE = "Command # 1 (EVAL local i = 1 …) of pipeline caused error: "


@pytest.mark.parametrize(("exc", "reason"), [
    (OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), "oom"),
    (ReadOnlyError("You can't write against a read only replica."), "readonly"),
    (BusyLoadingError("Redis is loading the dataset in memory"), "loading"),
    (ConnectionError("max number of clients reached"), "maxclients"),
    (ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
     "connection"),
    (TimeoutError("Timeout reading from 127.0.0.1:6379"), "timeout"),
    (ResponseError("MISCONF Redis is configured to save RDB snapshots"), "misconf"),
    (ResponseError(PIPELINE + "MISCONF Redis is configured to save RDB snapshots"), "misconf"),
    (ResponseError("BUSY Redis is busy running a script."), "busy"),
    (ResponseError("UNBLOCKED force unblock from blocking operation (master -> replica?)"),
     "readonly"),
    (ExecAbortError("Transaction discarded because of previous errors: maxmemory"), "oom"),
    (Contention("gave up after 50 conflicting attempts"), "contention"),
])
def test_refusals_are_named(exc: BaseException, reason: str) -> None:
    assert refusal(exc) == reason


@pytest.mark.parametrize("exc", [
    ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
    ResponseError("NOGROUP No such key 'ib:events' or consumer group 'flow'"),
    ResponseError("ERR unknown command 'FOO'"),
    KeyError("a bug"),
])
def test_everything_else_is_not_a_refusal(exc: BaseException) -> None:
    assert refusal(exc) is None


def test_a_watch_error_from_a_lost_connection_is_a_refusal_not_a_conflict() -> None:
    """redis-py turns LOADING (a connection error) while watching into a WatchError: retried
    as a conflict it cost 20 s of attempts against a loading Redis."""
    try:
        try:
            raise BusyLoadingError("Redis is loading the dataset in memory")
        except BusyLoadingError:  # as redis-py raises it: the context kept, not chained
            raise WatchError(  # noqa: B904
                "A BusyLoadingError occurred while watching one or more keys")
    except WatchError as exc:
        lost = lost_while_watching(exc)
    assert lost is not None and refusal(lost) == "loading"
    assert lost_while_watching(WatchError("Watched variable changed.")) is None
