"""Two scheduler replicas on one real Redis: one digest per period, also across a kill.

Periods are 1 s and the lease lives 3 s so a takeover fits in a test; production uses
the same code with a 20 s lease and cron digests.
"""

from __future__ import annotations

import itertools
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from redis import Redis

from bot.domain.findings import Severity
from bot.domain.incident import Alert
from bot.schedule.leader import Firing, LeaderScheduler, ScheduledJob
from storage import keys
from storage.audit import AuditLog
from storage.claims import Claims
from storage.incidents import IncidentStore
from storage.leases import Lease, holder_pid, scheduler_lease
from storage.stores import open_stores
from tests.helpers.scheduler_replica import CHAT, POSTS

PERIOD, TTL, RENEW = 1.0, 3.0, 0.5
ROOT = Path(__file__).resolve().parents[2]
# slots lost to a takeover: the lease must expire, a follower must tick, then it catches up
MAX_SKIPPED = math.ceil((TTL + RENEW) / PERIOD)


def slot_index(slot_id: str) -> int:
    dt = datetime.strptime(slot_id, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC)
    return round(dt.timestamp() / PERIOD)


def wait_for(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if cond():
            return time.monotonic() - start
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


def llen(redis: Redis, key: str) -> int:
    return cast(int, redis.llen(key))


def lrange(redis: Redis, key: str) -> list[str]:
    return [str(x) for x in cast(list[Any], redis.lrange(key, 0, -1))]


def check_slots(slots: list[int], allowed_gaps: int) -> None:
    """No slot twice; holes only where a takeover happened, each at most MAX_SKIPPED."""
    assert len(slots) == len(set(slots)), f"a slot ran twice: {sorted(slots)}"
    ordered = sorted(slots)
    holes = [(a, b) for a, b in itertools.pairwise(ordered) if b - a > 1]
    assert len(holes) <= allowed_gaps, f"slots skipped outside a takeover: {holes}"
    for a, b in holes:
        assert b - a - 1 <= MAX_SKIPPED, f"takeover skipped {b - a - 1} slots ({a}..{b})"


def test_lease_only_its_owner_can_extend_or_release(redis: Redis) -> None:
    a = Lease(redis, keys.scheduler_lease(), 0.3, token="a")
    b = Lease(redis, keys.scheduler_lease(), 0.3, token="b")
    assert a.acquire() and not b.acquire()
    assert not b.renew() and not b.release()
    assert a.renew() and a.holder() == "a"
    time.sleep(0.4)
    assert a.holder() is None and not a.renew()  # expired: the owner cannot revive it
    assert b.acquire() and a.release() is False and b.holder() == "b"
    assert b.release() and b.holder() is None


class Replicas:
    """In-process replicas (threads) recording each firing as (slot, replica name)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.posts: list[tuple[int, str]] = []
        self.lock = threading.Lock()
        self.all: dict[str, LeaderScheduler] = {}

    def start(self, name: str) -> LeaderScheduler:
        def digest(f: Firing) -> None:
            with self.lock:
                self.posts.append((slot_index(f.slot_id), name))

        stores = open_stores(self.url)
        sched = LeaderScheduler(
            stores.claims(),
            stores.scheduler_lease(TTL),
            [ScheduledJob("digest", digest, every_s=PERIOD)],
            renew_s=RENEW,
            catchup_s=30,
        )
        self.all[name] = sched.start()
        return sched

    def leader(self) -> str:
        leaders = [n for n, s in self.all.items() if s.is_leader]
        assert len(leaders) <= 1, f"two leaders at once: {leaders}"
        return leaders[0] if leaders else ""


@pytest.fixture
def replicas(redis: Redis, redis_url: str) -> Iterator[Replicas]:
    r = Replicas(redis_url)
    yield r
    for s in r.all.values():
        s.stop()


def test_two_replicas_one_post_per_period_across_kill_and_handover(replicas: Replicas) -> None:
    replicas.start("a")
    replicas.start("b")
    wait_for(lambda: replicas.leader() != "", 2)
    time.sleep(3.2)
    first = replicas.leader()
    replicas.all[first].stop(release=False)  # dies holding the lease
    takeover = wait_for(lambda: replicas.leader() not in ("", first), TTL + RENEW + 2)
    assert takeover <= TTL + RENEW + 0.5
    time.sleep(2.2)
    second = replicas.leader()
    replicas.start("c")
    replicas.all[second].stop(release=True)  # graceful: hands over at once, skips nothing
    handover = wait_for(lambda: replicas.leader() == "c", 2 * RENEW + 1)
    time.sleep(2.2)
    replicas.all["c"].stop()
    slots = [s for s, _ in replicas.posts]
    check_slots(slots, allowed_gaps=1)  # only the kill may lose slots
    assert {n for _, n in replicas.posts} == {first, second, "c"}
    assert len(slots) >= 7, replicas.posts
    assert handover <= 2 * RENEW + 0.5


def test_firing_claim_blocks_a_second_run_of_the_same_slot(redis: Redis) -> None:
    ran: list[str] = []
    spec = ScheduledJob("digest", lambda f: ran.append(f.slot_id), every_s=60)
    a = LeaderScheduler(Claims(redis), scheduler_lease(redis, 3), [spec], renew_s=1)
    b = LeaderScheduler(Claims(redis), scheduler_lease(redis, 3), [spec], renew_s=1)
    a._leading = b._leading = True  # both believe they lead (a paused old leader): claims decide
    now = 1_800_000_030.0
    assert a.fire(spec, now) is True
    assert b.fire(spec, now + 5) is False
    assert a.fire(spec, now + 60) is True
    assert len(ran) == 2 and ran[0] != ran[1]


def test_a_failing_job_is_counted_and_does_not_stop_the_scheduler(redis: Redis) -> None:
    calls: list[float] = []

    def boom(f: Firing) -> None:
        calls.append(f.ts)
        raise RuntimeError("slack down")

    spec = ScheduledJob("digest", boom, every_s=60)
    s = LeaderScheduler(Claims(redis), scheduler_lease(redis, 3), [spec], renew_s=1)
    s._leading = True
    assert s.fire(spec, 1_800_000_030.0) is False
    assert calls == [1_800_000_000.0]
    assert s.fire(spec, 1_800_000_031.0) is False and len(calls) == 1  # slot stays claimed


def spawn(url: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.scheduler_replica",
            url,
            str(PERIOD),
            str(TTL),
            "1.0",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def critical_incident(
    store: IncidentStore, host: str, severity: Severity = Severity.CRITICAL
) -> str:
    alert = Alert(source="webhook", host=host, kind="vram_idle", severity=severity)
    incident, created = store.open_or_fold(alert)
    assert created
    return incident.id


def test_sigkilled_leader_is_replaced_and_escalation_fires_once(
    redis: Redis, redis_url: str
) -> None:
    store = IncidentStore(redis)
    wanted = critical_incident(store, "gpu-01")
    answered = critical_incident(store, "gpu-02")
    AuditLog(redis).append(answered, "U0AAAAAAA", "approval.first_approver", {})
    mild = critical_incident(store, "gpu-03", Severity.WARNING)
    procs = [spawn(redis_url), spawn(redis_url)]
    try:
        wait_for(lambda: llen(redis, POSTS) >= 3 and llen(redis, CHAT) >= 1, 30, 0.1)
        holder = redis.get(keys.scheduler_lease())
        assert holder is not None
        leader = holder_pid(str(holder))
        assert leader is not None
        leader_pid = leader[1]
        victim = next(p for p in procs if p.pid == leader_pid)
        os.kill(victim.pid, signal.SIGKILL)  # by PID, holding the lease
        victim.wait(timeout=10)
        survivor = next(p for p in procs if p is not victim)
        wait_for(
            lambda: (holder_pid(str(redis.get(keys.scheduler_lease()) or "")) or ("", 0))[1]
            == survivor.pid,
            60,  # within TTL + renew when the machine is idle; no speed claim here
            0.05,
        )
        n = llen(redis, POSTS)
        wait_for(lambda: llen(redis, POSTS) >= n + 3, 10, 0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    posts = [x.split("|") for x in lrange(redis, POSTS)]
    check_slots([slot_index(s) for s, _ in posts], allowed_gaps=1)
    assert {int(pid) for _, pid in posts} == {p.pid for p in procs}
    chat = [x.split("|") for x in lrange(redis, CHAT)]
    assert [c[2] for c in chat] == [wanted], chat  # once; not the answered or the warning one
    assert chat[0][1] == "C0ESCALATE" and "gpu-01" in chat[0][3]
    assert answered != mild


def utc(y: int, mo: int, d: int, h: int, mi: int, s: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, s, tzinfo=UTC)


def test_slots_are_the_same_on_every_replica() -> None:
    every = ScheduledJob("poll", lambda f: None, every_s=60)
    assert every.latest_slot(utc(2024, 5, 2, 8, 0, 59), 600) == utc(2024, 5, 2, 8, 0)
    assert every.latest_slot(utc(2024, 5, 2, 8, 1, 0), 600) == utc(2024, 5, 2, 8, 1)
    assert every.latest_slot(utc(2024, 5, 2, 8, 0, 59), 30) is None  # too old to catch up
    daily = ScheduledJob("digest", lambda f: None, cron="0 8 * * *")
    assert daily.latest_slot(utc(2024, 5, 2, 8, 0, 0), 600) == utc(2024, 5, 2, 8, 0)
    assert daily.latest_slot(utc(2024, 5, 2, 8, 9, 0), 600) == utc(2024, 5, 2, 8, 0)
    assert daily.latest_slot(utc(2024, 5, 2, 7, 59, 59), 600) is None
    berlin = ScheduledJob("digest", lambda f: None, cron="0 8 * * *", timezone="Europe/Berlin")
    slot = berlin.latest_slot(utc(2024, 5, 2, 6, 0, 1), 600)  # 08:00 CEST is 06:00 UTC
    assert slot is not None and slot.astimezone(UTC) == utc(2024, 5, 2, 6, 0)
    assert Firing("digest", utc(2024, 5, 2, 8, 0)).slot_id == "20240502T080000.000000Z"


@pytest.mark.parametrize("kw", [
    {}, {"every_s": 5, "cron": "* * * * *"}, {"every_s": 0}, {"cron": "61 * * * *"},
    {"cron": "0 8 * * *", "timezone": "Mars/Base"},
])
def test_bad_job_specs_fail_at_start(kw: dict[str, Any]) -> None:
    with pytest.raises((ValueError, LookupError)):
        ScheduledJob("x", lambda f: None, **kw)


def test_new_leader_catches_up_a_missed_slot_once(redis: Redis, redis_url: str) -> None:
    ran: list[tuple[str, str]] = []

    def replica(name: str) -> LeaderScheduler:
        spec = ScheduledJob("hourly", lambda f: ran.append((f.slot_id, name)), every_s=3600)
        stores = open_stores(redis_url)
        return LeaderScheduler(stores.claims(), stores.scheduler_lease(TTL), [spec],
                               renew_s=RENEW, catchup_s=7200).start()

    a = replica("a")  # the hour's slot began up to an hour ago: nobody ran it yet
    wait_for(lambda: len(ran) == 1, 5)
    a.stop(release=True)
    b = replica("b")
    wait_for(lambda: b.is_leader, 5)
    time.sleep(0.5)
    b.stop()
    assert ran[0][1] == "a" and len(ran) == 1  # b found the slot claimed: no second run
