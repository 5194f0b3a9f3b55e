"""One run at a time per job: a Redis lease with a short TTL, refreshed by the reporter.

RQ delivers at least once: a retry can start while the previous run's process is still
being torn down, or (if a heartbeat was late) while it still runs. The new run waits
until the lease is free; a holder on this machine whose process is gone is not waited for.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable

from redis import Redis

from storage import keys

_REFRESH = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
)
_RELEASE = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)


class LeaseTimeout(RuntimeError):
    pass


def _holder_dead(value: bytes | str | None) -> bool:
    """True when the holder is a process on this machine that no longer exists."""
    if value is None:
        return False
    text = value.decode() if isinstance(value, bytes) else value
    host, _, rest = text.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Lease:
    def __init__(self, conn: Redis, job_id: str, ttl_s: float) -> None:
        self.conn, self.key = conn, keys.job_lease(job_id)
        self.ttl_ms = max(1000, int(ttl_s * 1000))
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def acquire(self, wait_s: float, on_wait: Callable[[], None] | None = None) -> float:
        """Take the lease, waiting up to ``wait_s``; return seconds waited."""
        t0 = time.monotonic()
        while not self.conn.set(self.key, self.token, nx=True, px=self.ttl_ms):
            holder: bytes | str | None = self.conn.get(self.key)  # type: ignore[assignment]
            if holder is not None and _holder_dead(holder):
                self.conn.eval(_RELEASE, 1, self.key, holder)  # only if still that holder
                continue
            if time.monotonic() - t0 > wait_s:
                raise LeaseTimeout(f"job lease {self.key} still held by {holder!r}")
            if on_wait is not None:
                on_wait()
            time.sleep(min(0.5, self.ttl_ms / 4000))
        return time.monotonic() - t0

    def refresh(self) -> bool:
        return bool(self.conn.eval(_REFRESH, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> None:
        self.conn.eval(_RELEASE, 1, self.key, self.token)
