"""The PagerDuty outbox: Events v2 items per incident, appended atomically, sent in order.

Each incident has its own list (``keys.page_queue``); a sorted set (``keys.page_ready``)
says when each incident's head item may go next. A sender takes the incident's lease
(``storage/leases.py``) before sending the head, so two replicas never send the same item
at once; the lease outlives the HTTP timeout. Every change after a send is a Lua
compare-and-swap on the head item's id: ``complete`` pops it only if it is still the
head, ``defer`` rewrites it with its attempt count and pushes the incident's time back,
``reject`` moves an item PagerDuty called invalid to the dead list. An item leaves the
queue only through one of those, so a crash at any point leaves it to be sent again.

``enqueue`` appends only when the incident's page state allows the action
(``bot/domain/paging.py`` ``ALLOWED_FROM``): one trigger per incident, ever, and never
after someone acked; acknowledge and resolve only once it was triggered.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from redis import Redis

from bot.domain.paging import ALLOWED_FROM, PageItem
from storage import keys
from storage.leases import Lease, page_lease

_ENQUEUE = """
local cur = redis.call('HGET', KEYS[1], ARGV[1]) or ''
for i = 5, #ARGV do
  if ARGV[i] == cur or (ARGV[i] == '-' and cur == '') then
    redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
    if ARGV[3] ~= '' then
      redis.call('RPUSH', KEYS[2], ARGV[3])
      redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[1])
    end
    return 1
  end
end
return 0
"""
_HEAD_IS = """
local head = redis.call('LINDEX', KEYS[1], 0)
local matched = head and cjson.decode(head)['id'] == ARGV[1]
"""
_AFTER = """
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[3])
elseif next_at then redis.call('ZADD', KEYS[2], next_at, ARGV[3]) end
if redis.call('GET', KEYS[3]) == ARGV[2] then redis.call('DEL', KEYS[3]) end
return matched and 1 or 0
"""
# ARGV: item id, lease token, incident id, now (complete/reject) or until (defer), new json
_COMPLETE = _HEAD_IS + """
local next_at = ARGV[4]
if matched then redis.call('LPOP', KEYS[1]) end
""" + _AFTER
_DEFER = _HEAD_IS + """
local next_at = nil
if matched then redis.call('LSET', KEYS[1], 0, ARGV[5]); next_at = ARGV[4] end
""" + _AFTER
_REJECT = _HEAD_IS + """
local next_at = ARGV[4]
if matched then redis.call('LPOP', KEYS[1]); redis.call('RPUSH', KEYS[4], ARGV[5]) end
""" + _AFTER


class PageOutbox:
    """Durable, ordered per incident; see the module docstring for the guarantees."""

    def __init__(self, redis: Redis, *, clock: Callable[[], float] = time.time) -> None:
        self.redis, self.clock = redis, clock

    def enqueue(self, item: PageItem) -> bool:
        """Append ``item`` if the incident's page state allows it; False when it does not."""
        return self._move(item.incident_id, item.action.value, item.to_json())

    def mark_acked(self, incident_id: str) -> bool:
        """Someone acked before any page: the incident will never trigger."""
        return self._move(incident_id, "acked", "")

    def _move(self, incident_id: str, new_state: str, item_json: str) -> bool:
        allowed = [a or "-" for a in ALLOWED_FROM[new_state]]
        done = self.redis.eval(_ENQUEUE, 3, keys.page_state(), keys.page_queue(incident_id),
                               keys.page_ready(), incident_id, new_state, item_json,
                               str(self.clock()), *allowed)
        return bool(done)

    def state(self, incident_id: str) -> str:
        return str(self.redis.hget(keys.page_state(), incident_id) or "")

    def paged(self, states: tuple[str, ...]) -> list[str]:
        """Incidents whose page state is one of ``states`` (e.g. triggered, not resolved)."""
        rows = self.redis.hgetall(keys.page_state())
        return sorted(str(k) for k, v in rows.items() if v in states)  # type: ignore[union-attr]

    def due(self, now: float, limit: int = 50) -> list[str]:
        """Incidents whose head item may be sent now, longest waiting first."""
        rows = self.redis.zrangebyscore(keys.page_ready(), "-inf", now, start=0, num=limit)
        return [str(r) for r in rows]  # type: ignore[union-attr]

    def head(self, incident_id: str) -> PageItem | None:
        raw = self.redis.lindex(keys.page_queue(incident_id), 0)
        return PageItem.from_json(str(raw)) if raw else None

    def items(self, incident_id: str) -> list[PageItem]:
        rows = self.redis.lrange(keys.page_queue(incident_id), 0, -1)
        return [PageItem.from_json(str(r)) for r in rows]  # type: ignore[union-attr]

    def lease(self, incident_id: str, ttl_s: float) -> Lease:
        return page_lease(self.redis, incident_id, ttl_s)

    def complete(self, item: PageItem, lease: Lease) -> bool:
        """Sent: pop it if it is still the head (True), release the lease."""
        return self._script(_COMPLETE, item, lease, str(self.clock()), "")

    def defer(self, item: PageItem, lease: Lease, until: float, error: str) -> bool:
        """Not sent: keep it at the head with one more attempt, due again at ``until``."""
        return self._script(_DEFER, item, lease, str(until), item.failed(error).to_json())

    def reject(self, item: PageItem, lease: Lease, error: str) -> bool:
        """PagerDuty called it invalid: off the queue onto the dead list, with the reason."""
        dead = json.dumps({"item": json.loads(item.to_json()), "error": error[:500],
                           "at": self.clock()})
        return self._script(_REJECT, item, lease, str(self.clock()), dead)

    def dead(self) -> list[dict[str, object]]:
        rows = self.redis.lrange(keys.page_dead(), 0, -1)
        return [json.loads(str(r)) for r in rows]  # type: ignore[union-attr]

    def _script(self, script: str, item: PageItem, lease: Lease, when: str, extra: str) -> bool:
        done = self.redis.eval(script, 4, keys.page_queue(item.incident_id), keys.page_ready(),
                               keys.page_lease(item.incident_id), keys.page_dead(), item.id,
                               lease.token, item.incident_id, when, extra)
        return bool(done)
