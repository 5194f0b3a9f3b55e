"""Who looks at the App Home, and what each was last shown, so a change refreshes only
the views that would differ. Shared by every replica."""

from __future__ import annotations

from redis import Redis

from storage import keys


class HomeViewers:
    def __init__(self, redis: Redis, workspace: str, keep_s: float = 7 * 86400.0) -> None:
        self.redis, self.workspace, self.keep_s = redis, workspace, keep_s

    def opened(self, user: str, ts: float) -> None:
        key = keys.home_viewers(self.workspace)
        pipe = self.redis.pipeline()
        pipe.zadd(key, {user: ts})
        pipe.zremrangebyscore(key, "-inf", ts - self.keep_s)
        pipe.execute()

    def recent(self, since: float) -> list[str]:
        raw = self.redis.zrangebyscore(keys.home_viewers(self.workspace), since, "+inf")
        return [r.decode() if isinstance(r, bytes) else str(r) for r in raw]  # type: ignore[union-attr]

    def shown(self, user: str) -> str:
        value = self.redis.hget(keys.home_shown(self.workspace), user)
        return value.decode() if isinstance(value, bytes) else str(value or "")

    def mark_shown(self, user: str, digest: str) -> None:
        self.redis.hset(keys.home_shown(self.workspace), user, digest)
