"""Slack usergroup membership cached in Redis, so every replica asks Slack once per TTL.

``usergroups.users.list`` is Tier 2 (about 20 calls a minute per workspace); with
several replicas and per-policy approver groups, per-process caches alone would each
ask. Membership is a list of user ids; a stale entry for a few minutes is the same
trade the in-process cache already makes. A Redis outage falls back to asking Slack.
"""

from __future__ import annotations

import json
import logging

from redis import Redis
from redis.exceptions import RedisError

from storage import keys

log = logging.getLogger(__name__)


class UsergroupCache:
    def __init__(self, redis: Redis, ttl_s: float = 300.0) -> None:
        self.redis, self.ttl_s = redis, ttl_s

    def get(self, group: str) -> frozenset[str] | None:
        try:
            raw = self.redis.get(keys.usergroup_members(group))
        except RedisError as exc:
            log.warning("usergroup cache unavailable: %s", exc)
            return None
        return frozenset(json.loads(str(raw))) if raw else None

    def put(self, group: str, members: frozenset[str]) -> None:
        try:
            self.redis.set(keys.usergroup_members(group), json.dumps(sorted(members)),
                           px=max(1, int(self.ttl_s * 1000)))
        except RedisError as exc:
            log.warning("usergroup cache unavailable: %s", exc)
