"""The one place a Redis client is made; the stores in ``storage/`` take it as an argument.

Code outside ``storage/`` never holds a client: entry points open ``storage/stores.py``
(``open_stores``) and pass stores down; it catches the errors below and never imports
``redis`` itself (``tests/test_architecture.py`` checks both).
"""

from __future__ import annotations

from redis import Redis
from redis.exceptions import ConnectionError as StorageConnectionError
from redis.exceptions import RedisError as StorageError
from redis.exceptions import ResponseError as StorageResponseError
from redis.exceptions import TimeoutError as StorageTimeoutError

__all__ = ["Redis", "StorageConnectionError", "StorageError", "StorageResponseError",
           "StorageTimeoutError", "connect"]


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
