"""Blast radius across replicas: one Lua script counts hosts per policy and fleet-wide.

A policy's limit is distinct hosts per window; the fleet breaker is distinct hosts per
hour over every policy. Both are sorted sets scored by when the host was counted,
pruned by the window, and read, compared and written in one script, so two replicas
asking at the same moment never pass the limit together (rq's ``rate_limit.py`` does the
same with ZSETs). A host already counted in the policy's window is admitted again
without counting twice. The call that trips the breaker is the only one told so
(``tripped``): it records the trip once (an audit entry and a ``policy.breaker_tripped``
event, which paging picks up). The breaker stays open for one fleet window, or until
``reset``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from redis import Redis

from bot.domain.policy import Admission, BreakerState
from storage import keys
from storage.audit import AuditLog
from storage.events import IncidentEvents

BREAKER_EVENT = "policy.breaker_tripped"
BREAKER_RESET = "policy.breaker_reset"

# KEYS: policy zset, fleet zset, breaker flag. ARGV: host, now ms, policy window ms,
# policy max hosts (0: none), fleet cap, fleet window ms.
# Returns {code, policy hosts, fleet hosts}; code: counted|again|limit|breaker|tripped.
COUNT = """
local now = tonumber(ARGV[2])
local pw, fw = tonumber(ARGV[3]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - pw)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - fw)
local function answer(code)
  return {code, redis.call('ZRANGE', KEYS[1], 0, -1), redis.call('ZRANGE', KEYS[2], 0, -1)}
end
local host = ARGV[1]
if tonumber(redis.call('GET', KEYS[3]) or '0') > now then return answer('breaker') end
if redis.call('ZSCORE', KEYS[1], host) then return answer('again') end
local max = tonumber(ARGV[4])
if max > 0 and redis.call('ZCARD', KEYS[1]) >= max then return answer('limit') end
local in_fleet = redis.call('ZSCORE', KEYS[2], host)
if not in_fleet and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  redis.call('SET', KEYS[3], now + fw, 'PX', fw)
  return answer('tripped')
end
redis.call('ZADD', KEYS[1], now, host)
redis.call('PEXPIRE', KEYS[1], pw)
if not in_fleet then
  redis.call('ZADD', KEYS[2], now, host)
  redis.call('PEXPIRE', KEYS[2], fw)
end
return answer('counted')
"""


def _ms(seconds: float) -> int:
    return int(seconds * 1000)  # the sets are scored in ms, like stream ids


def _s(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PolicyLimits:
    """The counts behind ``auto`` (see the module docstring)."""

    def __init__(self, redis: Redis, *, fleet_cap: int, fleet_window_s: float = 3600.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.redis, self.fleet_cap, self.fleet_window_s = redis, fleet_cap, fleet_window_s
        self.clock = clock
        self._count = redis.register_script(COUNT)
        self.audit = AuditLog(redis, clock=clock)
        self.events = IncidentEvents(redis)

    def try_count(self, policy: str, host: str, now: float, window_s: float,
                  max_hosts: int) -> Admission:
        """Count ``host`` under ``policy`` if it fits; ``max_hosts`` 0: only the breaker."""
        code, hosts, fleet = self._count(
            keys=[keys.policy_hosts(policy), keys.policy_fleet_hosts(), keys.policy_breaker()],
            args=[host, _ms(now), max(1, _ms(window_s)), max(0, max_hosts),
                  max(0, self.fleet_cap), max(1, _ms(self.fleet_window_s))])
        verdict = _s(code)
        admission = Admission(
            admitted=verdict in ("counted", "again"), hosts=tuple(_s(h) for h in hosts),
            breaker=verdict in ("breaker", "tripped"), tripped=verdict == "tripped",
            fleet_hosts=tuple(_s(h) for h in fleet), cap=self.fleet_cap)
        if admission.tripped:
            self._record_trip(policy, host, admission, now)
        return admission

    def _record_trip(self, policy: str, host: str, admission: Admission, now: float) -> None:
        """``at`` (whole seconds) names this trip: paging pages once per trip with it."""
        detail = {"policy": policy, "host": host, "hosts": list(admission.fleet_hosts),
                  "cap": self.fleet_cap, "window_s": self.fleet_window_s}
        self.audit.append_global("policy", BREAKER_EVENT, detail)
        self.events.publish(BREAKER_EVENT, "", policy=policy, host=host,
                            hosts=",".join(admission.fleet_hosts), cap=self.fleet_cap,
                            window_s=self.fleet_window_s, at=int(now))

    def breaker(self) -> BreakerState:
        """Whether the breaker is open now, with the hosts it counted (for rendering)."""
        now = self.clock()
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(keys.policy_breaker())
            pipe.zrangebyscore(keys.policy_fleet_hosts(), _ms(now - self.fleet_window_s), "+inf")
            until, hosts = pipe.execute()
        is_open = bool(until) and float(until) > _ms(now)
        return BreakerState(is_open, tuple(_s(h) for h in hosts), self.fleet_cap)

    def hosts(self, policy: str, window_s: float) -> tuple[str, ...]:
        """Hosts counted under ``policy`` in its window (read-only: ``policy check``)."""
        found = self.redis.zrangebyscore(keys.policy_hosts(policy),
                                         _ms(self.clock() - window_s), "+inf")
        return tuple(_s(h) for h in found)  # type: ignore[union-attr]

    def reset(self, actor: str) -> bool:
        """Close the breaker by hand (a person looked); audited. False if it was closed."""
        closed = bool(self.redis.delete(keys.policy_breaker()))
        if closed:
            self.audit.append_global(actor, BREAKER_RESET, {})
        return closed
