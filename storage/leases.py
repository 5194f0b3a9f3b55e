"""The one lease: a key owned by a random token, extended and released only by its owner.

Three users: the scheduler (one leader among replicas, ``keys.scheduler_lease()``), the
extraction job (one run at a time per job, ``keys.job_lease(job)``) and the incident
message's render ledger (one sender per incident at a time, ``keys.render_lock(id)``).
RQ delivers at least once, so a retry can start while the previous run is still being
torn down; ``wait_for`` waits until the lease is free, and a holder on this machine whose
process is gone is not waited for.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable

from redis import Redis

from storage import keys
from storage.claims import claim

_RENEW = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
          "return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end")
_RELEASE = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
            "return redis.call('del', KEYS[1]) else return 0 end")


class LeaseTimeout(RuntimeError):
    pass


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def holder_pid(holder: str) -> tuple[str, int] | None:
    """The (host, pid) a lease token names, or None for a token in another form."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    return (host, int(pid)) if pid.isdigit() else None


def holder_dead(holder: str) -> bool:
    """True when the holder is a process on this machine that no longer exists (also
    read by the incident reconciler for the owners of in-flight steps)."""
    named = holder_pid(holder)
    if named is None or named[0] != socket.gethostname():
        return False
    try:
        os.kill(named[1], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class Lease:
    """``SET NX PX`` with a token ``host:pid:random``; Lua compare-and-extend/delete."""

    def __init__(self, conn: Redis, key: str, ttl_s: float, token: str | None = None) -> None:
        if ttl_s <= 0:
            raise ValueError("lease ttl must be positive")
        self.conn, self.key, self.ttl_s = conn, key, ttl_s
        self.ttl_ms = max(1, int(ttl_s * 1000))
        self.token = token or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"

    def acquire(self) -> bool:
        """One try; a dead local holder is cleared first (only if it still holds it)."""
        if claim(self.conn, self.key, self.token, self.ttl_s):
            return True
        holder = self.holder()
        if holder is not None and holder_dead(holder):
            self.conn.eval(_RELEASE, 1, self.key, holder)
            return claim(self.conn, self.key, self.token, self.ttl_s)
        return False

    def wait_for(self, wait_s: float, on_wait: Callable[[], None] | None = None,
                 poll_s: float | None = None) -> float:
        """Take the lease, waiting up to ``wait_s``; return seconds waited."""
        t0 = time.monotonic()
        poll = min(0.5, self.ttl_ms / 4000) if poll_s is None else poll_s
        while not self.acquire():
            if time.monotonic() - t0 > wait_s:
                raise LeaseTimeout(f"lease {self.key} still held by {self.holder()!r}")
            if on_wait is not None:
                on_wait()
            time.sleep(poll)
        return time.monotonic() - t0

    def renew(self) -> bool:
        return bool(self.conn.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> bool:
        return bool(self.conn.eval(_RELEASE, 1, self.key, self.token))

    def holder(self) -> str | None:
        value: bytes | str | None = self.conn.get(self.key)  # type: ignore[assignment]
        return None if value is None else _text(value)


def scheduler_lease(conn: Redis, ttl_s: float, token: str | None = None) -> Lease:
    return Lease(conn, keys.scheduler_lease(), ttl_s, token)


def job_lease(conn: Redis, job_id: str, ttl_s: float) -> Lease:
    return Lease(conn, keys.job_lease(job_id), max(1.0, ttl_s))


def render_lease(conn: Redis, incident_id: str, ttl_s: float) -> Lease:
    return Lease(conn, keys.render_lock(incident_id), ttl_s)


def page_lease(conn: Redis, incident_id: str, ttl_s: float) -> Lease:
    """The replica sending an incident's head page item (issue 27)."""
    return Lease(conn, keys.page_lease(incident_id), ttl_s)
