"""Slack's rate limits as one budget in Redis, shared by every replica of the bot.

Slack limits per workspace and method tier (``chat.update`` is Tier 3, about 50 a
minute) and posts to about one per second per channel. Each grant is one Lua script
(GCRA: a theoretical arrival time per key, on Redis's clock, so replicas agree) that also
spaces edits of one message. The answer is how long to wait, never a sleep: the caller
requeues that one message and serves the others. A Redis outage never stops chat.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from redis import Redis
from redis.exceptions import RedisError

from storage import keys
from storage.claims import claim

log = logging.getLogger(__name__)

# KEYS[1] tier (or channel) state, KEYS[2] one message's gate; ARGV: emission interval
# ms, burst tolerance ms, message gate ms (0: no message gate), reserve ms (this call may
# not take the last ``reserve`` of the burst: kept for urgent calls). Returns ms to wait.
GRANT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gate_ms = tonumber(ARGV[3])
if gate_ms > 0 then
  local left = redis.call('PTTL', KEYS[2])
  if left > 0 then return left end
end
local interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local reserve = tonumber(ARGV[4] or '0')
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
if tat - burst + reserve > now then return tat - burst + reserve - now end
redis.call('SET', KEYS[1], tat + interval, 'PX', tat + interval - now + burst + 1000)
if gate_ms > 0 then redis.call('SET', KEYS[2], '1', 'PX', gate_ms) end
return 0
"""

TIERS = {"chat.update": ("tier3", 50.0), "views.publish": ("tier4", 100.0)}  # per minute


def workspace_of(token: str | None) -> str:
    """A stable workspace key from the bot token (one token per installed workspace)."""
    return hashlib.sha256((token or "").encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BudgetSettings:
    per_minute: dict[str, float] | None = None  # method → calls a minute (TIERS by default)
    burst: int = 3  # calls allowed back to back before spacing applies
    post_interval_s: float = 1.0  # per channel
    message_interval_s: float = 2.0  # edits of one message


class SlackBudget:
    def __init__(self, redis: Redis, workspace: str,
                 settings: BudgetSettings | None = None) -> None:
        self.redis, self.workspace = redis, workspace
        self.settings = settings or BudgetSettings()
        self._grant = redis.register_script(GRANT)

    def _run(self, state_key: str, gate_key: str, interval_s: float, burst: int,
             gate_s: float, reserve: int = 0) -> float:
        interval_ms = max(1, int(interval_s * 1000))
        try:
            left = self._grant(keys=[state_key, gate_key],
                               args=[interval_ms, interval_ms * max(0, burst - 1),
                                     int(gate_s * 1000),
                                     interval_ms * min(reserve, max(0, burst - 1))])
        except RedisError as exc:
            log.warning("slack budget unavailable: %s", exc)
            return 0.0
        return max(int(left), 0) / 1000 if left else 0.0

    def per_minute(self, method: str) -> float:
        custom = (self.settings.per_minute or {}).get(method)
        return custom if custom is not None else TIERS.get(method, ("tier3", 50.0))[1]

    def try_update(self, channel: str, ts: str, method: str = "chat.update", *,
                   urgent: bool = False) -> float:
        """0 to send this message's edit now, else seconds to wait (message or tier).
        Only an ``urgent`` edit (a storm's table: the one message that shows a whole
        burst, issue 37) may take the tier's last call of its burst: under a burst the
        other edits wait for it, never the other way round."""
        tier = TIERS.get(method, ("tier3", 50.0))[0]
        return self._run(keys.slack_tier_budget(self.workspace, tier),
                         keys.chat_update_gate(channel, ts), 60.0 / self.per_minute(method),
                         self.settings.burst, self.settings.message_interval_s,
                         reserve=0 if urgent else 1)

    def try_call(self, method: str) -> float:
        """0 to make one call of ``method`` now (its tier), else seconds to wait."""
        tier = TIERS.get(method, ("tier3", 50.0))[0]
        return self._run(keys.slack_tier_budget(self.workspace, tier), "", 60.0 /
                         self.per_minute(method), self.settings.burst, 0.0)

    def try_post(self, channel: str) -> float:
        """0 to post in ``channel`` now, else seconds to wait (about 1 per second)."""
        return self._run(keys.slack_post_budget(self.workspace, channel), "",
                         self.settings.post_interval_s, 1, 0.0)

    def hold_message(self, channel: str, ts: str, seconds: float) -> None:
        """Slack said 429 for this message: no replica edits it before ``Retry-After``."""
        try:
            self.redis.set(keys.chat_update_gate(channel, ts), "1",
                           px=max(1, int(seconds * 1000)))
        except RedisError as exc:
            log.warning("slack budget unavailable: %s", exc)


def message_gate(redis: Redis, channel: str, ts: str, interval_s: float) -> float:
    """Only the per-message spacing (a claim that expires): 0 to go, else seconds to wait."""
    key = keys.chat_update_gate(channel, ts)
    try:
        if claim(redis, key, "1", interval_s):
            return 0.0
        left = redis.pttl(key)
    except RedisError as exc:
        log.warning("chat update gate unavailable: %s", exc)
        return 0.0
    return max(int(left), 1) / 1000 if isinstance(left, int) and left > 0 else 0.001
