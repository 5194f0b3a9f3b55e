"""Shared test rig: a real redis-server per session (AOF on), a clean database per test.

Servers are started on free loopback ports and torn down by PID, never by name.
Feature fixtures live in ``tests/fixtures/`` and are loaded as plugins below.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from redis import Redis

from bot.rig.localredis import LocalRedis, start_local_redis
from storage.connection import connect
from storage.stores import Stores

pytest_plugins = [
    "tests.fixtures.extract",
    "tests.fixtures.sim",
    "tests.fixtures.alerts",
    "tests.fixtures.fake_pynvml",
    "tests.fixtures.slack",
    "tests.fixtures.remediation",
    "tests.fixtures.slurm",
]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRedis]:
    server = start_local_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: LocalRedis) -> str:
    return redis_server.url


@pytest.fixture
def redis(redis_server: LocalRedis) -> Iterator[Redis]:
    """A decoded client on a flushed database."""
    client = connect(redis_server.url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def redis_bytes(redis_server: LocalRedis, redis: Redis) -> Iterator[Redis]:
    """A raw-bytes client (RQ) on the same flushed database."""
    client = connect(redis_server.url, decode=False)
    yield client
    client.close()


@pytest.fixture
def stores(redis: Redis, redis_bytes: Redis) -> Stores:
    """``storage/stores.py``'s stores on the flushed database (what entry points open)."""
    return Stores(redis, redis_bytes)
