"""Render sequence numbers for the incident message, so an older render never lands last.

Every render of an incident's message takes the next number (``INCR``) *before* it reads
the stored state, so a higher number always reflects a state at least as new. Sending
compares that number with the last one applied, under a short per-incident lock: two
replicas, a late thread or a retried edit can never overwrite a newer state.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import cast

from redis import Redis

from storage import keys

LOCK_MS = 15_000
RETENTION_S = 30 * 86400
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RenderLedger:
    """Allocates and applies render numbers; needs a ``decode_responses`` client."""

    def __init__(self, redis: Redis, wait_s: float = 20.0) -> None:
        self.redis, self.wait_s = redis, wait_s
        self._release = redis.register_script(_RELEASE)

    def next_seq(self, incident_id: str) -> int:
        key = keys.render_seq(incident_id)
        seq = int(cast(int, self.redis.incr(key)))
        self.redis.expire(key, RETENTION_S)
        return seq

    def applied(self, incident_id: str) -> int:
        return int(cast(str | None, self.redis.get(keys.render_applied(incident_id))) or 0)

    def send_if_newer(self, incident_id: str, seq: int, send: Callable[[], object]) -> bool:
        """Run ``send`` iff ``seq`` is newer than the last applied render; record it."""
        token = self._lock(incident_id)
        try:
            if seq <= self.applied(incident_id):
                return False
            send()
            self.redis.set(keys.render_applied(incident_id), str(seq), ex=RETENTION_S)
            return True
        finally:
            if token:
                self._release(keys=[keys.render_lock(incident_id)], args=[token])

    def _lock(self, incident_id: str) -> str:
        """Take the per-incident lock (waits for a sender on another replica)."""
        token, key = secrets.token_hex(8), keys.render_lock(incident_id)
        deadline = time.monotonic() + self.wait_s
        while not self.redis.set(key, token, nx=True, px=LOCK_MS):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"render lock for incident {incident_id} is held")
            time.sleep(0.02)
        return token
