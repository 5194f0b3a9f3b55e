"""Per node: the hardware faults each diagnosis saw, the health gates that passed, the CUDA
smoke's last good figures, and the nodes sent to RMA (issue 36).

Faults and passes are sorted sets scored by time, trimmed past ``keep_s`` on every write
(one pipeline); the rule that reads them is ``bot/domain/repeat.py`` (pure).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from redis import Redis

from bot.domain.repeat import FaultSeen, GatePass, RepeatOffence
from storage import keys

KEEP_S = 30 * 86400.0
MAX_PER_HOST = 2000


class HealthHistory:
    def __init__(self, redis: Redis, *, keep_s: float = KEEP_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.keep_s = keep_s
        self.clock = clock

    def _add(self, key: str, members: Mapping[str, float]) -> None:
        if not members:
            return
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(key, dict(members))
            pipe.zremrangebyscore(key, "-inf", self.clock() - self.keep_s)
            pipe.zremrangebyrank(key, 0, -MAX_PER_HOST - 1)
            pipe.expire(key, int(self.keep_s) + 86400)
            pipe.execute()

    def record_faults(self, host: str, faults: Iterable[FaultSeen]) -> None:
        self._add(keys.health_faults(host), {f.to_json(): f.at for f in faults})

    def faults(self, host: str) -> list[FaultSeen]:
        raw = cast(list[str], self.redis.zrange(keys.health_faults(host), 0, -1))
        return [FaultSeen.from_json(m) for m in raw]

    def record_pass(self, host: str, gate: GatePass) -> None:
        self._add(keys.health_gates(host), {gate.to_json(): gate.at})

    def passes(self, host: str) -> list[GatePass]:
        raw = cast(list[str], self.redis.zrange(keys.health_gates(host), 0, -1))
        return [GatePass.from_json(m) for m in raw]

    def smoke_baseline(self, host: str) -> dict[str, dict[str, Any]]:
        raw = cast(dict[str, str], self.redis.hgetall(keys.health_smoke(host)))
        return {k: json.loads(v) for k, v in raw.items()}

    def set_smoke_baseline(self, host: str, gpus: Mapping[str, Mapping[str, Any]]) -> None:
        if gpus:
            self.redis.hset(keys.health_smoke(host), mapping={
                k: json.dumps(dict(v), sort_keys=True) for k, v in gpus.items()})

    def send_to_rma(self, offence: RepeatOffence) -> None:
        self.redis.hset(keys.health_rma(), offence.host, json.dumps(offence.to_json()))

    def rma(self) -> list[RepeatOffence]:
        """Every node on the RMA list, oldest offence first (the digest lists them)."""
        raw = cast(dict[str, str], self.redis.hgetall(keys.health_rma()))
        found = [RepeatOffence.from_json(json.loads(v)) for v in raw.values()]
        return sorted(found, key=lambda o: o.again_at)

    def returned(self, host: str) -> None:
        """A person took the node off the RMA list (the part was replaced)."""
        self.redis.hdel(keys.health_rma(), host)
