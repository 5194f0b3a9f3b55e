"""Each way a real ``redis-server`` says "not now" is named a refusal (issue 39), and only
those: the edges answer 503 with ``Retry-After`` for them, a 500 stays our bug's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import RedisError

from bot.rig.localredis import LocalRedis, start_local_redis
from storage.connection import connect, refusal
from tests.helpers.redis_faults import FAULT_ARGS, RedisFaults


@pytest.fixture
def faults(tmp_path: Path) -> Iterator[RedisFaults]:
    server = start_local_redis(tmp_path / "redis", args=FAULT_ARGS)
    faults = RedisFaults(server)
    try:
        yield faults
    finally:
        faults.close()
        server.stop()


def refused_as(client: Redis, write: Callable[[Redis], object]) -> str | None:
    try:
        write(client)
    except RedisError as exc:
        return refusal(exc)
    raise AssertionError("Redis took the write")


def test_out_of_memory_read_only_and_misconf_are_refusals(faults: RedisFaults) -> None:
    client = connect(faults.server.url)
    faults.fill("2mb")
    assert refused_as(client, lambda c: c.set("k", "v")) == "oom"
    assert refused_as(client, lambda c: c.pipeline().set("a", "1").hset("h", "f", "v")
                      .execute()) == "oom"  # a MULTI: refused whole
    assert client.get("a") is None  # nothing half-written
    faults.lift_memory()
    faults.read_only()
    assert refused_as(client, lambda c: c.set("k", "v")) == "readonly"
    faults.primary()
    faults.misconf()
    assert refused_as(client, lambda c: c.set("k", "v")) == "misconf"
    faults.clear_misconf()
    client.set("k", "v")  # writable again
    assert refused_as(client, lambda c: c.hset("k", "f", "v")) is None  # WRONGTYPE: a bug


def test_too_many_clients_timeouts_and_loading_are_refusals(faults: RedisFaults) -> None:
    held = [connect(faults.server.url) for _ in range(2)]
    for c in held:
        c.ping()
    faults.max_clients(2)  # the admin connection and those two are already in
    assert refused_as(connect(faults.server.url), lambda c: c.ping()) == "maxclients"
    faults.max_clients(10_000)
    quick = Redis.from_url(faults.server.url, socket_timeout=0.5)
    sleeping = faults.sleep(2)
    assert refused_as(quick, lambda c: c.set("k", "v")) == "timeout"
    sleeping.join()
    server: LocalRedis = faults.server
    faults.restart_loading()
    assert refused_as(connect(server.url), lambda c: c.set("k", "v")) == "loading"
    faults.loaded()
    for c in [*held, quick]:
        c.close()
