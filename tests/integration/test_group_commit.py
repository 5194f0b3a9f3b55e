"""Group commit: requests waiting together are written together, each answered with
its own outcomes, and a failed write fails every request in it (nothing acknowledged)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from redis import Redis

from bot.domain.incident import Alert
from bot.domain.planner import PlanOutcome as Outcome
from bot.ingest.group_commit import GroupCommit
from bot.rig.localredis import start_local_redis
from storage.connection import connect
from storage.incidents import IncidentStore, IngestResult


def alert(host: str, delivery: str) -> Alert:
    return Alert(source="alertmanager", host=host, kind="vram_idle", identity=delivery)


def test_waiting_requests_share_one_write_and_get_their_own_outcomes(redis: Redis) -> None:
    store = IncidentStore(redis, group_wait_s=0)
    writer = GroupCommit(store.ingest)
    batches = [[alert(f"h{i}", f"d{i}")] for i in range(6)]
    batches.append([alert("h0", "d0"), alert("h9", "d9")])  # the HA pair's resend of d0

    async def main() -> list[IngestResult]:
        return list(await asyncio.gather(*(writer.submit(b) for b in batches)))

    results = asyncio.run(main())
    assert (writer.writes, writer.requests) == (1, 7)
    assert [len(r.outcomes) for r in results] == [1, 1, 1, 1, 1, 1, 2]
    assert all(r.outcomes[0][0] is not Outcome.DUPLICATE for r in results[:6])
    assert results[6].outcomes[0][0] is Outcome.DUPLICATE
    assert results[6].outcomes[1][0] is not Outcome.DUPLICATE
    assert results[0].outcomes[0][1] == results[6].outcomes[0][1]  # the same incident


def test_a_full_write_splits_and_later_requests_get_a_second_write(redis: Redis) -> None:
    store = IncidentStore(redis, group_wait_s=0)
    writer = GroupCommit(store.ingest, max_alerts=3)
    batches = [[alert(f"s{i}", f"e{i}"), alert(f"t{i}", f"f{i}")] for i in range(3)]

    async def main() -> list[IngestResult]:
        return list(await asyncio.gather(*(writer.submit(b) for b in batches)))

    results = asyncio.run(main())
    assert writer.writes == 3 and writer.requests == 3  # 2 + 2 > 3: one request per write
    assert all(len(r.outcomes) == 2 for r in results)


def test_a_failed_write_fails_every_request_in_it(tmp_path: object) -> None:
    server = start_local_redis()
    conn = connect(server.url)
    calls: list[int] = []

    def ingest(alerts: Sequence[Alert]) -> IngestResult:
        calls.append(len(alerts))
        return IncidentStore(conn, group_wait_s=0).ingest(alerts)

    writer = GroupCommit(ingest)
    server.stop()

    async def main() -> list[BaseException | IngestResult]:
        return list(await asyncio.gather(*(writer.submit([alert(f"x{i}", f"g{i}")])
                                           for i in range(3)), return_exceptions=True))

    results = asyncio.run(main())
    assert calls == [3]
    assert all(isinstance(r, Exception) for r in results)
    with pytest.raises(Exception):  # noqa: B017 - whichever connection error redis-py raises
        conn.ping()
