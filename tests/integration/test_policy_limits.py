"""Blast radius on a real redis-server: replicas racing never pass a limit together, a
host is counted once per window, and the fleet breaker trips once and is recorded."""

from __future__ import annotations

import multiprocessing as mp
import threading

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis import Redis

from bot.domain.policy import BlastLimit, Policy
from bot.domain.policy_replay import Counter
from storage.audit import AuditLog
from storage.connection import connect
from storage.events import IncidentEvents
from storage.policy_limits import BREAKER_EVENT, PolicyLimits

NOW = 1_800_000_000.0


def limits(redis: Redis, cap: int = 100) -> PolicyLimits:
    return PolicyLimits(redis, fleet_cap=cap, clock=lambda: NOW)


def test_limit_counts_distinct_hosts_and_admits_a_counted_host_again(redis: Redis) -> None:
    pl = limits(redis)
    for host in ("gpu-03", "gpu-07", "gpu-11"):
        assert pl.try_count("stop", host, NOW, 3600, 3).admitted
    fourth = pl.try_count("stop", "gpu-12", NOW + 1, 3600, 3)
    assert not fourth.admitted and not fourth.breaker
    assert sorted(fourth.hosts) == ["gpu-03", "gpu-07", "gpu-11"]
    again = pl.try_count("stop", "gpu-07", NOW + 2, 3600, 3)
    assert again.admitted and len(again.hosts) == 3  # not counted twice
    assert pl.try_count("other", "gpu-12", NOW + 3, 3600, 3).admitted  # per policy
    assert pl.hosts("stop", 3600) == ("gpu-03", "gpu-07", "gpu-11")


def test_the_window_slides(redis: Redis) -> None:
    pl = limits(redis)
    assert pl.try_count("stop", "gpu-01", NOW, 60, 1).admitted
    assert not pl.try_count("stop", "gpu-02", NOW + 59, 60, 1).admitted
    later = pl.try_count("stop", "gpu-02", NOW + 61, 60, 1)
    assert later.admitted and later.hosts == ("gpu-02",)


def test_breaker_trips_once_records_and_stops_every_policy(redis: Redis) -> None:
    pl = limits(redis, cap=2)
    events = IncidentEvents(redis)
    assert pl.try_count("a", "gpu-01", NOW, 3600, 0).admitted
    assert pl.try_count("b", "gpu-02", NOW, 3600, 0).admitted
    trip = pl.try_count("a", "gpu-03", NOW, 3600, 0)
    assert trip.breaker and trip.tripped and not trip.admitted
    assert sorted(trip.fleet_hosts) == ["gpu-01", "gpu-02"]
    after = pl.try_count("b", "gpu-01", NOW, 3600, 0)  # even a host counted before
    assert after.breaker and not after.tripped and not after.admitted
    assert events.count(BREAKER_EVENT) == 1
    entry = [e for e in AuditLog(redis).recent() if e.action == BREAKER_EVENT]
    assert len(entry) == 1 and entry[0].detail["host"] == "gpu-03"
    assert entry[0].detail["cap"] == 2
    state = pl.breaker()
    assert state.open and sorted(state.hosts) == ["gpu-01", "gpu-02"]
    assert pl.reset("UALICE") and not pl.breaker().open and not pl.reset("UALICE")
    assert [e.action for e in AuditLog(redis).recent()][-1] == "policy.breaker_reset"


def test_threads_racing_never_pass_the_limit(redis: Redis, redis_url: str) -> None:
    admitted: list[str] = []
    lock, start = threading.Lock(), threading.Barrier(8)

    def replica(n: int) -> None:
        client = connect(redis_url)
        pl = limits(client)
        start.wait()
        for i in range(10):
            host = f"gpu-{n}-{i}"
            if pl.try_count("stop", host, NOW, 3600, 3).admitted:
                with lock:
                    admitted.append(host)
        client.close()

    threads = [threading.Thread(target=replica, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 3
    assert sorted(limits(redis).hosts("stop", 3600)) == sorted(admitted)


def _process(url: str, n: int, start: threading.Barrier, out: mp.Queue) -> None:
    client = connect(url)
    pl = limits(client, cap=5)
    start.wait()
    got = [h for i in range(20)
           if pl.try_count(f"p{i % 2}", h := f"gpu-{n}-{i}", NOW, 3600, 4).admitted]
    out.put(got)
    client.close()


def test_processes_racing_share_one_fleet_cap(redis: Redis, redis_url: str) -> None:
    """Two policies of four hosts each, across three processes, under a fleet cap of 5."""
    ctx = mp.get_context("fork")
    start, out = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_process, args=(redis_url, n, start, out)) for n in range(3)]
    for p in procs:
        p.start()
    got = [h for _ in procs for h in out.get(timeout=30)]
    for p in procs:
        p.join(timeout=30)
    assert len(got) == 5 and len(set(got)) == 5
    assert IncidentEvents(redis).count(BREAKER_EVENT) == 1


STEPS = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["h1", "h2", "h3", "h4",
                                                                          "h5"]),
                           st.integers(0, 2000)), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STEPS, st.integers(0, 4))
def test_replay_counts_exactly_like_the_script(redis: Redis, steps: list[tuple[str, str, int]],
                                               cap: int) -> None:
    """``policy replay``'s in-memory count and the Lua script agree on every sequence:
    admitted, the hosts in the window, the breaker and its one trip."""
    redis.flushdb()
    policies = {"a": Policy("a", limit=BlastLimit(2, 1800)), "b": Policy("b")}
    live, sim, now = PolicyLimits(redis, fleet_cap=cap, clock=lambda: NOW), Counter(cap), NOW
    for name, host, dt in steps:
        now += dt
        policy = policies[name]
        limit = policy.limit
        got = live.try_count(name, host, now, limit.per_s if limit else 3600.0,
                             limit.max_hosts if limit else 0)
        want = sim.try_count(policy, host, now)
        assert (got.admitted, got.breaker, got.tripped) == (want.admitted, want.breaker,
                                                            want.tripped)
        assert sorted(got.hosts) == sorted(want.hosts)
