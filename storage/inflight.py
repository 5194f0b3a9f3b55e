"""Who is working on an incident's transient state, and until when (issue 24).

Like rq's started-job registry: an ``inflight`` sorted set (member: incident id, score:
the owner's deadline) plus a small hash per incident (owner token, state, deadline,
re-drive attempts). The incident store writes both in the same MULTI as the transition
into a transient state and removes them in the same MULTI as the transition out, so
"in flight" always means "in a transient state". A long step moves its deadline forward
with ``renew`` (``ZADD XX``, only while it still owns the step).

An owner token is ``host:pid:thread``: one thread runs one step at a time, so the same
token re-entering its step (after a Redis outage made the first try fail) is safe, and a
token whose process is gone on this machine is known to be abandoned without waiting for
its deadline. ``""`` means released: anyone may claim the step (a re-drive).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from redis import Redis
from redis.client import Pipeline

from bot.domain.lifecycle import IncidentState
from storage import keys
from storage.claims import claim
from storage.leases import holder_dead

# compare the owner, then move the deadline in the hash and (only if present) the set
_RENEW = """
if ARGV[1] == '' or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'deadline', ARGV[2])
redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[3])
return 1
"""


def step_owner() -> str:
    """This thread's owner token (``host:pid:thread``, the form ``leases.holder_pid`` reads)."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def owner_gone(owner: str) -> bool:
    """The owner is a process on this machine that no longer runs (never true for "")."""
    return bool(owner) and holder_dead(owner)


@dataclass(frozen=True)
class Inflight:
    """One transient state's owner, deadline and how often it was re-driven."""

    incident_id: str
    state: IncidentState
    owner: str  # "" : released, anyone may claim it
    deadline: float
    attempts: int = 0

    def may_claim(self, owner: str, now: float) -> bool:
        """Whether ``owner`` may (re-)enter this step: it is its own, released, overdue,
        or its owner's process is gone."""
        return (not self.owner or self.owner == owner or self.deadline <= now
                or owner_gone(self.owner))

    def abandoned(self, now: float) -> str | None:
        """Why the reconciler should take this step over, or None while it is alive."""
        if owner_gone(self.owner):
            return f"owner {self.owner} is gone"
        if self.deadline <= now:
            return f"deadline passed {now - self.deadline:.0f}s ago"
        return None

    def to_hash(self) -> dict[str, str]:
        return {"state": self.state.value, "owner": self.owner, "deadline": repr(self.deadline),
                "attempts": str(self.attempts)}

    @classmethod
    def from_hash(cls, incident_id: str, raw: dict[str, str]) -> Inflight | None:
        if not raw.get("state"):
            return None
        return cls(incident_id, IncidentState(raw["state"]), raw.get("owner", ""),
                   float(raw.get("deadline") or 0), int(raw.get("attempts") or 0))


def watch_entry(pipe: Pipeline, incident_id: str) -> Inflight | None:
    """WATCH and read one incident's entry (inside the caller's optimistic transaction)."""
    pipe.watch(keys.incident_owner(incident_id))
    raw = cast(dict[str, str], pipe.hgetall(keys.incident_owner(incident_id)))
    return Inflight.from_hash(incident_id, raw)


def enter(pipe: Pipeline, entry: Inflight) -> None:
    """Queue the entry's writes in the caller's MULTI."""
    key = keys.incident_owner(entry.incident_id)
    pipe.delete(key)
    pipe.hset(key, mapping=entry.to_hash())
    pipe.zadd(keys.incidents_inflight(), {entry.incident_id: entry.deadline})


def leave(pipe: Pipeline, incident_id: str) -> None:
    """Queue the entry's removal in the caller's MULTI (a no-op when there is none)."""
    pipe.delete(keys.incident_owner(incident_id))
    pipe.zrem(keys.incidents_inflight(), incident_id)


class InflightRegistry:
    """Reads of the in-flight set, the owner's renew, and the one-sweeper claim."""

    def __init__(self, redis: Redis, clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.clock = clock

    def due(self, now: float | None = None) -> list[str]:
        """Incidents whose deadline has passed (``ZRANGEBYSCORE 0 now``), oldest first."""
        at = self.clock() if now is None else now
        return cast(list[str], self.redis.zrangebyscore(keys.incidents_inflight(), 0, at))

    def entries(self) -> list[Inflight]:
        """Every in-flight entry (a few dozen at most: the open incidents' transient ones)."""
        ids = cast(list[str], self.redis.zrange(keys.incidents_inflight(), 0, -1))
        with self.redis.pipeline(transaction=False) as pipe:
            for incident_id in ids:
                pipe.hgetall(keys.incident_owner(incident_id))
            rows = pipe.execute()
        found = (Inflight.from_hash(i, r) for i, r in zip(ids, rows, strict=True))
        return [e for e in found if e is not None]

    def get(self, incident_id: str) -> Inflight | None:
        raw = cast(dict[str, str], self.redis.hgetall(keys.incident_owner(incident_id)))
        return Inflight.from_hash(incident_id, raw)

    def renew(self, incident_id: str, owner: str, ttl_s: float) -> bool:
        """Move the deadline to now + ``ttl_s`` while ``owner`` still holds the step; False
        when it does not (a reconciler took it over: stop, the step is someone else's)."""
        deadline = self.clock() + ttl_s
        return bool(self.redis.eval(_RENEW, 2, keys.incident_owner(incident_id),
                                    keys.incidents_inflight(), owner, repr(deadline),
                                    incident_id))

    def claim_sweep(self, token: str, ttl_s: float) -> bool:
        """At most one sweep per ``ttl_s`` across replicas (rq's maintenance lock)."""
        return claim(self.redis, keys.reconcile_sweep(), token, ttl_s)
