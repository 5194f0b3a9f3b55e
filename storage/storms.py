"""Storms: when a channel gets more new incidents a minute than a person can read, one
message per kind holds them all (issue 37). This store keeps who is in which storm.

Slack posts about one message a second per channel, so 200 alerts at once would put the
200th incident's own message more than three minutes late. Each incident is *placed*
once, when its first message is due: its own message, or a storm. One Lua script decides,
so two replicas placing at once agree:

- the channel's arrivals of the last ``window_s`` are counted (the incident itself
  included); above ``threshold`` a storm of the incident's kind starts, or one already
  collecting that kind takes it;
- a storm collects while incidents keep coming: its ``active`` key expires after
  ``quiet_s`` without a new member, and the next incident of the kind gets its own
  message again (or starts a new storm if the rate is still high);
- when a storm starts, the same kind's arrivals of the window that were placed on their
  own but whose message has not gone out yet (waiting their turn at Slack's pace) move
  into it: otherwise the storm's own message would wait behind theirs. One that is being
  sent, or whose last try may have reached Slack (uncertain), keeps its own place.

The decision is kept (``placed``): a later look returns the same answer, whatever the
rate is by then. The members sorted set is the storm's table, oldest first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from redis import Redis

from storage import keys

OWN = "-"  # placed on its own: the incident's own message

# KEYS: placed, arrivals, active, seq
# ARGV: incident id, now, window s, threshold, quiet ms, kind, channel, storm hash key
#       template, members key template, posted key template, card purpose, outbox queue
#       key template, outbox items key template
# Returns {storm id or '-', 1 when this call started the storm}.
# An arrival is taken in only if its card is neither posted, nor being sent (its outbox head
# claimed), nor possibly out already (its head uncertain: a try timed out, and Slack may
# have posted it where it went then; moved into the storm, the retry would look for it in
# the storm's thread, not find it, and post a second card, chaos seed 4242's gpu-06 #190):
# a sender that claims it later sees the storm when it sends (``placement``).
PLACE = """
local function card_out(other_id)
  if redis.call('HEXISTS', string.format(ARGV[10], other_id), ARGV[11]) == 1 then
    return true
  end
  local head = redis.call('ZRANGE', string.format(ARGV[12], other_id), 0, 0)[1]
  if not head then return false end
  local raw = redis.call('HGET', string.format(ARGV[13], other_id), head)
  if raw == false or raw == nil then return false end
  local item = cjson.decode(raw)
  return item.claim ~= '' or item.uncertain == true
end
local id, now = ARGV[1], tonumber(ARGV[2])
local kind, channel = ARGV[6], ARGV[7]
local placed = redis.call('HGET', KEYS[1], id)
if placed then return {placed, 0} end
local member = kind .. '|' .. id
redis.call('ZADD', KEYS[2], now, member)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[2], math.floor(tonumber(ARGV[3]) * 1000) + 1000)
local storm = redis.call('GET', KEYS[3])
local started = 0
if not storm then
  if redis.call('ZCARD', KEYS[2]) <= tonumber(ARGV[4]) then
    redis.call('HSET', KEYS[1], id, '-')
    return {'-', 0}
  end
  storm = 'storm-' .. redis.call('INCR', KEYS[4])
  started = 1
  redis.call('HSET', string.format(ARGV[8], storm), 'id', storm, 'channel', channel,
             'kind', kind, 'started', ARGV[2])
  local prefix = kind .. '|'
  for _, other in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if string.sub(other, 1, #prefix) == prefix then
      local other_id = string.sub(other, #prefix + 1)
      if other_id ~= id and redis.call('HGET', KEYS[1], other_id) == '-'
         and not card_out(other_id) then
        redis.call('HSET', KEYS[1], other_id, storm)
        redis.call('ZADD', string.format(ARGV[9], storm), now, other_id)
      end
    end
  end
end
redis.call('SET', KEYS[3], storm, 'PX', ARGV[5])
redis.call('HSET', KEYS[1], id, storm)
redis.call('ZADD', string.format(ARGV[9], storm), now, id)
return {storm, started}
"""


@dataclass(frozen=True)
class Storm:
    id: str
    channel: str
    kind: str
    started: float


@dataclass(frozen=True)
class Placement:
    """Where an incident's message goes: ``storm`` None for its own message; ``started``
    when this very placement began the storm (its message is then posted)."""

    storm: Storm | None
    started: bool = False


class StormStore:
    def __init__(self, redis: Redis, *, window_s: float = 60.0, threshold: int = 10,
                 quiet_s: float = 300.0) -> None:
        self.redis = redis
        self.window_s, self.threshold, self.quiet_s = window_s, threshold, quiet_s
        self._place = redis.register_script(PLACE)

    def place(self, incident_id: str, kind: str, channel: str, now: float,
              card_purpose: str) -> Placement:
        """Decide (once) whether the incident gets its own message or joins a storm."""
        if self.threshold <= 0:  # storms off
            return Placement(None)
        got = self._place(
            keys=[keys.storm_placed(), keys.storm_arrivals(channel),
                  keys.storm_active(channel, kind), keys.storm_seq()],
            args=[incident_id, repr(now), repr(self.window_s), str(self.threshold),
                  str(max(1, int(self.quiet_s * 1000))), kind, channel,
                  _template(keys.storm), _template(keys.storm_members),
                  _template(keys.outbox_posted), card_purpose, _template(keys.outbox_queue),
                  _template(keys.outbox_items)])
        storm_id, started = str(got[0]), bool(int(got[1]))
        if storm_id == OWN:
            return Placement(None)
        storm = self.get(storm_id)
        return Placement(storm, started) if storm is not None else Placement(None)

    def storm_of(self, incident_id: str) -> str | None:
        """The storm an incident was placed in (None: its own message, or not placed)."""
        placed = cast(str | None, self.redis.hget(keys.storm_placed(), incident_id))
        return placed if placed and placed != OWN else None

    def get(self, storm_id: str) -> Storm | None:
        raw = cast(dict[str, str], self.redis.hgetall(keys.storm(storm_id)))
        if not raw:
            return None
        return Storm(raw["id"], raw["channel"], raw["kind"], float(raw.get("started") or 0))

    def members(self, storm_id: str) -> list[str]:
        """The storm's incident ids, in the order they joined."""
        return [str(m) for m in cast(list[str], self.redis.zrange(keys.storm_members(storm_id),
                                                                   0, -1))]

    def active(self, channel: str, kind: str) -> str | None:
        """The storm now collecting ``kind`` in ``channel`` (None: none)."""
        return cast(str | None, self.redis.get(keys.storm_active(channel, kind)))


def _template(key_for: Callable[[str], str]) -> str:
    """A key function's key with ``%s`` where the id goes (for the script's
    ``string.format``): keys stay spelled in ``storage/keys.py`` only."""
    return key_for("%s")
