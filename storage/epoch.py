"""The data epoch: how a running bot notices that Redis lost its data (issue 39).

Redis restarted without its volume and a failover to an empty replica look the same from
the bot: every key it wrote is gone, and Redis answers as if all were well (PING, even
writes). A failover to a replica that lagged looks different: the keys are there, but
older; the incident counter is below numbers the bot has already handed out, so new
incidents would reuse ids that old messages' buttons still carry.

So the first replica to find no epoch writes one (``SET NX``, no expiry, through
``storage/claims.py``): a random id and when it began. Each replica remembers the epoch it
joined and the highest incident number it has seen; the flow's data-loss watch compares
them with Redis every reconciler period. The epoch gone or different means the data was
lost; the counter below a number it saw means it went back in time. Either way one
replica (the one that wins ``claim_announcement`` for the lost epoch) says so in chat.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from redis import Redis

from storage import keys
from storage.claims import claim

ANNOUNCE_TTL_S = 7 * 86400.0  # long past any replica still holding the old epoch
# replace the epoch only while it is still ARGV[1] (compare-and-set)
_ROTATE = """
local raw = redis.call('GET', KEYS[1])
if raw and cjson.decode(raw)['id'] == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) end
return 1
"""
# raise the incident counter to at least ARGV[1]: numbers already handed out stay unused
_RAISE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if current < wanted then redis.call('SET', KEYS[1], wanted) return wanted end
return current
"""

# each of ARGV[2..] added to the set KEYS[1]; those it was not in yet are returned
_FIRST_TO_TELL = """
local fresh = {}
for i = 2, #ARGV do
  if redis.call('SADD', KEYS[1], ARGV[i]) == 1 then fresh[#fresh + 1] = ARGV[i] end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return fresh
"""


@dataclass(frozen=True)
class Epoch:
    """One life of the bot's data in Redis."""

    id: str
    began: float

    def to_json(self) -> str:
        return json.dumps({"id": self.id, "began": self.began})

    @classmethod
    def from_json(cls, raw: str) -> Epoch | None:
        try:
            data = json.loads(raw)
            return cls(str(data["id"]), float(data["began"]))
        except (ValueError, KeyError, TypeError):
            return None  # unreadable counts as gone: someone wrote over it


class EpochStore:
    """Read, begin and compare the data epoch; the incident counter it guards."""

    def __init__(self, redis: Redis, clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.clock = clock

    def read(self) -> Epoch | None:
        raw = cast(str | None, self.redis.get(keys.epoch()))
        return Epoch.from_json(raw) if raw else None

    def begin(self) -> Epoch:
        """The epoch in Redis; a new one when there is none (the first replica's wins)."""
        fresh = Epoch(secrets.token_hex(8), self.clock())
        claim(self.redis, keys.epoch(), fresh.to_json(), None)
        return self.read() or fresh

    def rotate(self, old: Epoch) -> Epoch:
        """A new epoch in place of ``old`` (the data went back in time under it), only
        while ``old`` is still the one in Redis: replicas that notice together agree."""
        fresh = Epoch(secrets.token_hex(8), self.clock())
        self.redis.eval(_ROTATE, 1, keys.epoch(), old.id, fresh.to_json())
        return self.read() or fresh

    def incident_counter(self) -> int:
        """The highest incident number handed out (``INC-N``), 0 when there is none."""
        raw = cast(str | None, self.redis.get(keys.incident_seq()))
        return int(raw) if raw and raw.isdigit() else 0

    def raise_counter(self, at_least: int) -> int:
        """Never hand out ``INC-1..at_least`` again (old messages still name them)."""
        return int(cast(int, self.redis.eval(_RAISE, 1, keys.incident_seq(), str(at_least))))

    def claim_announcement(self, lost: Epoch, token: str) -> bool:
        """True for exactly one replica per lost epoch: it says so in chat."""
        return claim(self.redis, keys.data_loss(lost.id), token, ANNOUNCE_TTL_S)

    def pool_shown(self, lost: Epoch, incident_ids: list[str]) -> None:
        """Add the incidents whose card this replica delivered to the lost epoch's pool."""
        if incident_ids:
            pipe = self.redis.pipeline(transaction=True)
            pipe.sadd(keys.data_loss_shown(lost.id), *incident_ids)
            pipe.expire(keys.data_loss_shown(lost.id), int(ANNOUNCE_TTL_S))
            pipe.execute()

    def shown(self, lost: Epoch, incident_ids: list[str]) -> set[str]:
        """Of ``incident_ids``, those some replica pooled as shown for the loss of ``lost``."""
        if not incident_ids:
            return set()
        found = cast(list[int], self.redis.smismember(keys.data_loss_shown(lost.id),
                                                       incident_ids))
        return {i for i, hit in zip(incident_ids, found, strict=True) if hit}

    def first_to_tell(self, lost: Epoch, incident_ids: list[str]) -> list[str]:
        """Of ``incident_ids``, those no replica has named yet for the loss of ``lost``
        (each is named by one replica, whichever asks first), in the order given."""
        if not incident_ids:
            return []
        fresh = cast(list[str], self.redis.eval(
            _FIRST_TO_TELL, 1, keys.data_loss_told(lost.id), str(int(ANNOUNCE_TTL_S)),
            *incident_ids))
        told = set(fresh)
        return [i for i in incident_ids if i in told]
