"""Render sequence numbers for the incident message, so an older render never lands last.

Every render of an incident's message takes the next number (``INCR``) *before* it reads
the stored state, so a higher number always reflects a state at least as new. Sending
compares that number with the last one applied, under a short per-incident lock: two
replicas, a late thread or a retried edit can never overwrite a newer state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from redis import Redis

from storage import keys
from storage.leases import render_lease

LOCK_S = 15.0  # longer than one chat call; a crashed sender's lock expires on its own
RETENTION_S = 30 * 86400


# KEYS[1] applied; ARGV: seq, retention seconds. The applied number only ever grows.
MARK_APPLIED = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > current then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
end
return current
"""


class RenderLedger:
    """Allocates and applies render numbers; needs a ``decode_responses`` client."""

    def __init__(self, redis: Redis, wait_s: float = 20.0) -> None:
        self.redis, self.wait_s = redis, wait_s
        self._mark = redis.register_script(MARK_APPLIED)

    def next_seq(self, incident_id: str) -> int:
        key = keys.render_seq(incident_id)
        seq = int(cast(int, self.redis.incr(key)))
        self.redis.expire(key, RETENTION_S)
        return seq

    def applied(self, incident_id: str) -> int:
        return int(cast(str | None, self.redis.get(keys.render_applied(incident_id))) or 0)

    def send_if_newer(self, incident_id: str, seq: int, send: Callable[[], object]) -> bool:
        """Run ``send`` iff ``seq`` is newer than the last applied render; record it."""
        lease = render_lease(self.redis, incident_id, LOCK_S)
        lease.wait_for(self.wait_s, poll_s=0.02)  # a sender on another replica finishes
        try:
            if seq <= self.applied(incident_id):
                return False
            send()
            self.redis.set(keys.render_applied(incident_id), str(seq), ex=RETENTION_S)
            return True
        finally:
            lease.release()

    def mark_applied(self, incident_id: str, seq: int) -> None:
        """Record a render the chat outbox delivered (it orders renders itself, under its
        own claim), so a render sent the other way is compared with it too."""
        self._mark(keys=[keys.render_applied(incident_id)], args=[seq, RETENTION_S])
