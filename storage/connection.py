"""The one place a Redis client is made; the stores in ``storage/`` take it as an argument.

Code outside ``storage/`` never holds a client: entry points open ``storage/stores.py``
(``open_stores``) and pass stores down; it catches the errors below and never imports
``redis`` itself (``tests/test_architecture.py`` checks both).
"""

from __future__ import annotations

from redis import Redis
from redis.exceptions import (
    AuthenticationError,
    BusyLoadingError,
    ClusterDownError,
    ExecAbortError,
    MasterDownError,
    NoPermissionError,
    OutOfMemoryError,
    ReadOnlyError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as StorageConnectionError
from redis.exceptions import RedisError as StorageError
from redis.exceptions import ResponseError as StorageResponseError
from redis.exceptions import TimeoutError as StorageTimeoutError

__all__ = ["Redis", "StorageConnectionError", "StorageError", "StorageResponseError",
           "StorageTimeoutError", "connect", "lost_while_watching", "refusal"]

# (exception class, reason): checked in order, the first match names the refusal
_REFUSAL_CLASSES: tuple[tuple[type[BaseException], str], ...] = (
    (OutOfMemoryError, "oom"),  # maxmemory reached under noeviction ("OOM command not allowed")
    (ReadOnlyError, "readonly"),  # a replica (a failover left us on the old primary)
    (BusyLoadingError, "loading"),  # still reading its AOF/RDB after a restart
    (MasterDownError, "masterdown"),
    (TryAgainError, "tryagain"),
    (ClusterDownError, "clusterdown"),
    (AuthenticationError, "auth"),
    (NoPermissionError, "auth"),
    (StorageTimeoutError, "timeout"),
)
# replies redis-py leaves as a plain ResponseError, by their first word
_REFUSAL_WORDS = {"MISCONF": "misconf", "BUSY": "busy", "NOREPLICAS": "noreplicas",
                  "OOM": "oom", "READONLY": "readonly", "LOADING": "loading",
                  "MASTERDOWN": "masterdown", "TRYAGAIN": "tryagain",
                  # a blocked read woken because the server became a replica (a failover)
                  "UNBLOCKED": "readonly"}


def refusal(exc: BaseException) -> str | None:
    """Why Redis refused a command, as a short reason (``oom``, ``readonly``, ``loading``,
    ``misconf``, ``maxclients``, ``timeout``, ``connection``, ``busy``…), or None when
    ``exc`` is not Redis saying "not now" (a wrong command of ours: a bug, a 500).

    A refusal changed nothing: a MULTI with a refused command is discarded whole
    (EXECABORT), and a refused single command or script never ran. The edges answer 503
    with ``Retry-After`` for these, and the flow re-drives what they interrupted."""
    for cls, reason in _REFUSAL_CLASSES:
        if isinstance(exc, cls):
            return reason
    named = getattr(exc, "refusal", None)  # ours: ``storage.incidents.Contention``
    if isinstance(named, str):
        return named
    text = str(exc)
    if isinstance(exc, StorageConnectionError):
        return "maxclients" if "max number of clients" in text else "connection"
    if isinstance(exc, ExecAbortError | StorageResponseError):
        # a pipeline's error quotes the command first: "Command # 1 (EVAL …) of pipeline
        # caused error: MISCONF …"
        said = text.rsplit("caused error: ", 1)[-1].removeprefix("EXECABORT ")
        word = said.split(" ", 1)[0].upper()
        if word in _REFUSAL_WORDS:
            return _REFUSAL_WORDS[word]
        if "maxmemory" in said:  # an aborted transaction quoting its refused command
            return "oom"
    return None


def lost_while_watching(exc: BaseException) -> BaseException | None:
    """The error behind a ``WatchError`` that was not a conflict: redis-py turns a
    connection lost (or refused: LOADING is a connection error) while keys were watched
    into "A BusyLoadingError occurred while watching one or more keys". Retrying that as
    a conflict tried 50 times against a loading Redis (20 s, then a late 200); it is a
    refusal, raised as one."""
    context = exc.__context__
    if context is not None and refusal(context) is not None:
        return context
    if "occurred while watching" in str(exc):
        return StorageConnectionError(str(exc))
    return None


def connect(url: str, *, decode: bool = True) -> Redis:
    """A client with short socket timeouts so an outage is an error, not a hang.

    RQ needs ``decode=False`` (it stores pickled bytes).
    """
    return Redis.from_url(
        url,
        decode_responses=decode,
        socket_connect_timeout=2.0,
        socket_timeout=5.0,
        health_check_interval=30,
    )
