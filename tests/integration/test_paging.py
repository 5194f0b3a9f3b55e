"""PagerDuty paging through the Redis outbox: real redis-server, the Events v2 stand-in.

Two ``PagingService`` instances are two replicas (own consumers, own HTTP clients, one
Redis). The clock is shared and moved by the test, so backoffs and ``after_s`` are
crossed without sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from redis import Redis

from bot.domain.findings import Severity
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.domain.paging import PagingPolicy
from bot.paging.client import EventsV2Client
from bot.paging.service import PagingService, PagingStores
from bot.rig.pagerduty_standin import PagerDutyStandIn
from storage import keys
from storage.audit import AuditLog
from storage.events import IncidentEvents
from storage.incidents import IncidentStore
from storage.paging import PageOutbox
from storage.stores import Stores

KEY = "R" * 32  # an Events v2 routing key is 32 characters


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def standin() -> Iterator[PagerDutyStandIn]:
    s = PagerDutyStandIn().start()
    yield s
    s.stop()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def replica(redis: Redis, standin: PagerDutyStandIn, clock: Clock, after_s: float = 0,
            key: str = KEY) -> PagingService:
    sender = EventsV2Client(standin.url, key, timeout_s=2)
    return PagingService(PagingStores.of(Stores(redis, redis), clock),
                         PagingPolicy(after_s=after_s, timeout_s=2), sender, clock=clock)


def open_incident(redis: Redis, clock: Clock, host: str = "gpu-01",
                  severity: Severity = Severity.CRITICAL) -> str:
    store = IncidentStore(redis, group_wait_s=0, clock=clock)
    incident, _ = store.open_or_fold(Alert("alertmanager", host, "vram_idle",
                                           summary=f"{host}: 8 GPUs hold VRAM at 0%",
                                           severity=severity))
    return incident.id


def drain(*replicas: PagingService, rounds: int = 5) -> None:
    for _ in range(rounds):
        for r in replicas:
            r.tick()


def test_an_unacked_critical_incident_pages_once_with_two_replicas(
        redis: Redis, standin: PagerDutyStandIn, clock: Clock) -> None:
    a, b = replica(redis, standin, clock), replica(redis, standin, clock)
    iid = open_incident(redis, clock)
    start = threading.Barrier(2)

    def spin(r: PagingService) -> None:
        start.wait()
        for _ in range(40):
            r.tick()

    threads = [threading.Thread(target=spin, args=(r,)) for r in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    (event,) = standin.wait_for(1)
    assert standin.actions(iid) == ["trigger"]
    body = event.body
    assert body["routing_key"] == KEY and body["dedup_key"] == iid
    assert body["payload"]["source"] == "gpu-01" and body["payload"]["severity"] == "critical"
    assert body["payload"]["summary"] == f"{iid} gpu-01: 8 GPUs hold VRAM at 0%"
    assert PageOutbox(redis).items(iid) == []


def test_ack_acknowledges_and_resolve_resolves(redis: Redis, standin: PagerDutyStandIn,
                                                clock: Clock) -> None:
    a, b = replica(redis, standin, clock), replica(redis, standin, clock)
    iid = open_incident(redis, clock)
    drain(a, b)
    IncidentEvents(redis).publish("incident.ack", iid, user="UALICE")  # what /ir ack publishes
    drain(a, b)
    assert standin.actions(iid) == ["trigger", "acknowledge"]
    IncidentStore(redis, clock=clock).transition(iid, IncidentState.RESOLVED, "UALICE", "fixed")
    drain(a, b)
    assert standin.actions(iid) == ["trigger", "acknowledge", "resolve"]
    assert standin.alerts() == {iid: "resolved"}


def test_not_paged_before_after_s_nor_when_acked_nor_below_the_severity(
        redis: Redis, standin: PagerDutyStandIn, clock: Clock) -> None:
    r = replica(redis, standin, clock, after_s=600)
    late, acked = open_incident(redis, clock, "gpu-01"), open_incident(redis, clock, "gpu-02")
    warning = open_incident(redis, clock, "gpu-03", Severity.WARNING)
    IncidentEvents(redis).publish("incident.ack", acked, user="UBOB")
    approved = open_incident(redis, clock, "gpu-04")
    AuditLog(redis, clock=clock).append(approved, "UCAROL", "approval.approved", {"kind": "x"})
    clock.now += 599
    drain(r)
    assert standin.events == []
    clock.now += 1
    drain(r)
    assert standin.alerts() == {late: "triggered"}
    assert standin.actions(acked) == standin.actions(warning) == standin.actions(approved) == []
    assert PageOutbox(redis).state(approved) == "acked"  # a person acted: never paged


def test_an_outage_loses_nothing_and_sends_nothing_twice(
        redis: Redis, standin: PagerDutyStandIn, clock: Clock) -> None:
    a, b = replica(redis, standin, clock), replica(redis, standin, clock)
    iid = open_incident(redis, clock)
    standin.down()
    drain(a, b)  # connection refused: deferred with backoff
    IncidentEvents(redis).publish("incident.ack", iid, user="UALICE")
    IncidentStore(redis, clock=clock).transition(iid, IncidentState.RESOLVED, "UALICE", "fixed")
    for _ in range(6):  # a minute and more of retries against a closed port
        clock.now += 20
        drain(a, b, rounds=2)
    assert [i.action.value for i in PageOutbox(redis).items(iid)] == [
        "trigger", "acknowledge", "resolve"]
    assert PageOutbox(redis).items(iid)[0].attempts >= 3
    standin.up()
    standin.fail(500, times=2)  # back, but answering 500 for a moment
    for _ in range(10):
        clock.now += 400
        drain(a, b, rounds=1)
    assert standin.actions(iid) == ["trigger", "acknowledge", "resolve"]
    assert PageOutbox(redis).items(iid) == [] and redis.zcard(keys.page_ready()) == 0


def test_a_429_with_retry_after_delays_the_item(redis: Redis, standin: PagerDutyStandIn,
                                                clock: Clock) -> None:
    r = replica(redis, standin, clock)
    iid = open_incident(redis, clock)
    standin.fail(429, times=1, retry_after="30")
    report = r.tick()
    assert report.deferred == 1 and standin.events == []
    assert redis.zscore(keys.page_ready(), iid) == clock.now + 30
    clock.now += 29
    assert r.tick().sent == 0
    clock.now += 1
    assert r.tick().sent == 1 and standin.actions(iid) == ["trigger"]


def test_an_invalid_event_goes_to_the_dead_list_with_the_reason(
        redis: Redis, standin: PagerDutyStandIn, clock: Clock) -> None:
    r = replica(redis, standin, clock, key="too-short")
    iid = open_incident(redis, clock)
    assert r.tick().rejected == 1
    (dead,) = PageOutbox(redis).dead()
    assert dead["item"]["incident_id"] == iid  # type: ignore[index]
    assert "routing_key" in str(dead["error"]) and PageOutbox(redis).items(iid) == []
