"""Group commit: requests waiting together are written together, each answered with
its own outcomes, and a failed write fails every request in it (nothing acknowledged).
A delivery written moments ago is answered without a write of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from redis import Redis

from bot.domain.incident import Alert
from bot.domain.planner import PlanOutcome as Outcome
from bot.ingest.group_commit import GroupCommit, RecentWrites
from bot.rig.localredis import start_local_redis
from storage.connection import connect
from storage.incidents import IncidentStore, IngestResult
from storage.silences import SilenceStore


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


class Counting:
    """The store's ingest, recording what each write was given."""

    def __init__(self, store: IncidentStore) -> None:
        self.store = store
        self.calls: list[list[str | None]] = []

    def __call__(self, alerts: Sequence[Alert]) -> IngestResult:
        self.calls.append([a.identity for a in alerts])
        return self.store.ingest(alerts)


def test_a_copy_written_moments_ago_is_answered_without_another_write(redis: Redis) -> None:
    """The HA pair's second copy, queued behind its first copy's write, costs no write;
    once the identity is older than the window it goes to the store again."""
    now = [0.0]
    ingest = Counting(IncidentStore(redis, group_wait_s=0))
    writer = GroupCommit(ingest, recent=RecentWrites(ttl_s=30, clock=lambda: now[0]))

    async def main() -> tuple[IngestResult, IngestResult]:
        first = asyncio.ensure_future(writer.submit([alert("h1", "d1"), alert("h2", "d2")]))
        while not ingest.calls:  # until the first copy's write is in flight
            await asyncio.sleep(0.001)
        second = await writer.submit([alert("h1", "d1"), alert("h3", "d3")])
        return await first, second

    first, second = asyncio.run(main())
    assert ingest.calls == [["d1", "d2"], ["d3"]]
    assert second.outcomes[0] == (Outcome.DUPLICATE, first.outcomes[0][1])
    assert second.outcomes[1][0] is Outcome.CREATED
    now[0] = 31.0
    again = asyncio.run(writer.submit([alert("h1", "d1")]))
    assert ingest.calls[-1] == ["d1"] and again.outcomes[0][0] is Outcome.DUPLICATE


def test_silenced_alerts_and_failed_writes_are_not_remembered(redis: Redis) -> None:
    SilenceStore(redis).add("h5", "vram_idle", 300, author="alice", reason="maintenance")
    ingest = Counting(IncidentStore(redis, group_wait_s=0))
    writer = GroupCommit(ingest)
    assert asyncio.run(writer.submit([alert("h5", "s1")])).outcomes[0][0] is Outcome.SILENCED
    asyncio.run(writer.submit([alert("h5", "s1")]))
    assert ingest.calls == [["s1"], ["s1"]]  # no marker on disk: the store decides again

    server = start_local_redis()
    failing = GroupCommit(IncidentStore(connect(server.url), group_wait_s=0).ingest)
    server.stop()
    with pytest.raises(Exception):  # noqa: B017 - whichever connection error redis-py raises
        asyncio.run(failing.submit([alert("h6", "f1")]))
    assert failing.recent.known(alert("h6", "f1")) is None


def test_recent_writes_are_bounded_by_count() -> None:
    recent = RecentWrites(max_keys=2)
    alerts = [alert(f"b{i}", f"k{i}") for i in range(3)]
    recent.add(alerts, [(Outcome.CREATED, f"INC-{i}") for i in range(3)])
    assert [recent.known(a) for a in alerts] == [
        None, (Outcome.DUPLICATE, "INC-1"), (Outcome.DUPLICATE, "INC-2")]
