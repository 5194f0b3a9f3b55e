"""The one claim helper, the one lease and the one job↔incident link, on a real Redis."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from redis import Redis

from storage import job_records as records
from storage import keys
from storage.claims import claim, unclaim
from storage.jobs import JobLinks
from storage.leases import Lease, LeaseTimeout, holder_pid, job_lease


def test_first_claim_wins_until_given_back(redis: Redis) -> None:
    assert claim(redis, "t:claim", "a", 60)
    assert not claim(redis, "t:claim", "b", 60)
    assert redis.get("t:claim") == "a" and 0 < redis.pttl("t:claim") <= 60_000
    unclaim(redis, "t:claim")
    assert claim(redis, "t:claim", "b", 60)


def test_a_dead_local_holder_is_not_waited_for(redis_bytes: Redis) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    token = f"{socket.gethostname()}:{child.pid}:x"
    dead = Lease(redis_bytes, keys.job_lease("ex-dead"), 60, token=token)
    assert dead.acquire()
    mine = job_lease(redis_bytes, "ex-dead", 60)
    assert mine.wait_for(5.0) >= 0 and mine.holder() == mine.token


def test_a_live_holder_is_waited_for_then_the_wait_gives_up(redis: Redis) -> None:
    first = job_lease(redis, "ex-live", 60)
    assert first.acquire()
    waits: list[int] = []
    with pytest.raises(LeaseTimeout):
        job_lease(redis, "ex-live", 60).wait_for(0.3, on_wait=lambda: waits.append(1))
    assert waits and first.renew() and first.release() and first.holder() is None


def test_holder_pid_reads_only_our_token_form() -> None:
    assert holder_pid("vm-1:4242:abcd") == ("vm-1", 4242)
    assert holder_pid("a") is None and holder_pid("vm:notapid:x") is None


def test_the_link_is_written_once_for_both_sides(redis: Redis) -> None:
    records.write(redis, "ex-1", name="demo")
    links = JobLinks(redis)
    assert links.incident_of("ex-1") is None
    links.link("ex-1", "INC-9")
    assert links.incident_of("ex-1") == "INC-9"
    assert records.read(redis, "ex-1")["incident_id"] == "INC-9"
