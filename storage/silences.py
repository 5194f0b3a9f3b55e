"""Silences per (host, kind) on Redis: a JSON value that expires with the silence itself,
plus a sorted set by expiry so they can be listed. Either side may be ``*``.

Redis expiry removes a silence at its end even if no process is running, and
the planner checks ``until`` again, so a clock-skewed replica never over-silences.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import cast

from redis import Redis

from bot.domain.incident import WILDCARD, SilenceRule, silence_candidates, valid_host, valid_kind
from bot.domain.maintenance import MaintenanceWindow, windows_from_json, windows_to_json
from storage import keys
from storage.audit import AuditLog

MAX_DURATION_S = 30 * 86400


def _member(host: str, kind: str) -> str:
    return f"{host}|{kind}"


def _check(host: str, kind: str) -> None:
    if host == WILDCARD and kind == WILDCARD:
        raise ValueError("a silence needs a host or a kind (not both '*')")
    if host != WILDCARD and not valid_host(host):
        raise ValueError(f"invalid host name {host!r}")
    if kind != WILDCARD and not valid_kind(kind):
        raise ValueError(f"invalid kind {kind!r}")


class SilenceStore:
    def __init__(self, redis: Redis, *, clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.clock = clock
        self.audit = AuditLog(redis, clock=clock)

    def add(self, host: str, kind: str, duration_s: float, author: str,
            reason: str = "") -> SilenceRule:
        """Silence firing alerts for (host, kind) for ``duration_s``; replaces an older one."""
        _check(host, kind)
        if not author.strip():
            raise ValueError("a silence needs an author")
        if not 0 < duration_s <= MAX_DURATION_S:
            raise ValueError(f"duration must be between 0 and {MAX_DURATION_S} seconds")
        now = self.clock()
        silence = SilenceRule(host, kind, now + duration_s, author.strip(), reason.strip()[:500],
                              now)
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(keys.silence(host, kind), silence.to_json(), ex=math.ceil(duration_s) + 1)
            pipe.zadd(keys.silences(), {_member(host, kind): silence.until})
            pipe.execute()
        self.audit.append_global(silence.author, "silence.added", {
            "host": host, "kind": kind, "until": silence.until, "reason": silence.reason})
        return silence

    def remove(self, host: str, kind: str, actor: str) -> bool:
        """End a silence early; False if there was none."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(keys.silence(host, kind))
            pipe.zrem(keys.silences(), _member(host, kind))
            deleted, _ = pipe.execute()
        if deleted:
            self.audit.append_global(actor, "silence.removed", {"host": host, "kind": kind})
        return bool(deleted)

    def list(self) -> list[SilenceRule]:
        """Active silences, soonest to end first (expired entries are pruned)."""
        now = self.clock()
        self.redis.zremrangebyscore(keys.silences(), "-inf", now)
        members = cast(list[str], self.redis.zrange(keys.silences(), 0, -1))
        if not members:
            return []
        pairs = [m.split("|", 1) for m in members]
        values = cast(list[str | None], self.redis.mget([keys.silence(h, k) for h, k in pairs]))
        found = [SilenceRule.from_json(v) for v in values if v]
        return [s for s in found if s.active(now)]

    def active_for(self, host: str, kind: str) -> SilenceRule | None:
        """The silence covering (host, kind) now, most specific first."""
        now = self.clock()
        slots = silence_candidates(host, kind)
        values = cast(list[str | None], self.redis.mget([keys.silence(h, k) for h, k in slots]))
        for value in values:
            if value and (silence := SilenceRule.from_json(value)).active(now):
                return silence
        return None

    def set_maintenance(self, windows: Sequence[MaintenanceWindow], actor: str) -> bool:
        """Replace the recurring windows (from the config at start); audited when they
        change, so the timeline says since when a window suppresses alerts."""
        text = windows_to_json(windows)
        old = self.redis.getset(keys.maintenance(), text)
        if old == text:
            return False
        self.audit.append_global(actor, "maintenance.set",
                                 {"windows": [w.to_dict() for w in windows]})
        return True

    def maintenance(self) -> tuple[MaintenanceWindow, ...]:
        """The recurring windows every replica's ingest reads (for the Home tab, the CLI)."""
        return windows_from_json(cast(str | None, self.redis.get(keys.maintenance())))
