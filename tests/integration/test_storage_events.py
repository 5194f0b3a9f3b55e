"""The incident event stream (consumer groups) and the audit log on a real Redis."""

from __future__ import annotations

import time

from redis import Redis

from storage.audit import AuditLog, hash_evidence
from storage.events import IncidentEvents


def test_each_event_goes_to_one_consumer_and_stays_until_acked(redis: Redis) -> None:
    events = IncidentEvents(redis)
    events.ensure_group("flow")
    for n in range(4):
        events.publish("incident.opened", f"INC-{n}", host="h", kind="vram_idle")
    first = events.consume("flow", "replica-a", count=2)
    second = events.consume("flow", "replica-b", count=10)
    assert [f["incident_id"] for _, f in first] == ["INC-0", "INC-1"]
    assert [f["incident_id"] for _, f in second] == ["INC-2", "INC-3"]
    assert first[0][1] == {
        "type": "incident.opened",
        "incident_id": "INC-0",
        "host": "h",
        "kind": "vram_idle",
    }
    assert events.consume("flow", "replica-a") == []
    events.ack("flow", first[0][0])
    assert [i for i, _ in events.pending("flow", "replica-a")] == [first[1][0]]
    # replica-b dies: its entries are claimed by a survivor after they go stale
    time.sleep(0.05)
    claimed = events.claim_stale("flow", "replica-a", min_idle_ms=10)
    assert sorted(f["incident_id"] for _, f in claimed) == ["INC-1", "INC-2", "INC-3"]


def test_blocking_consume_wakes_on_publish(redis: Redis) -> None:
    events = IncidentEvents(redis)
    events.ensure_group("flow", start="$")
    assert events.consume("flow", "c", block_ms=50) == []
    events.publish("incident.resolved", "INC-9", kind="disk_full")
    ((_, fields),) = events.consume("flow", "c", block_ms=1000)
    assert fields["kind"] == "disk_full" and fields["type"] == "incident.resolved"


def test_audit_timeline_in_order_with_global_copy(redis: Redis) -> None:
    audit = AuditLog(redis)
    ids = [audit.append("INC-1", "U1", f"step-{n}", {"n": n}) for n in range(3)]
    audit.append("INC-2", "bot", "other", {})
    timeline = audit.timeline("INC-1")
    assert [e.id for e in timeline] == ids
    assert [e.detail["n"] for e in timeline] == [0, 1, 2]
    assert [e.incident_id for e in audit.recent(10)] == ["INC-1", "INC-1", "INC-1", "INC-2"]


def test_evidence_hash_is_canonical() -> None:
    assert hash_evidence({"a": 1, "b": [1, 2]}) == hash_evidence({"b": [1, 2], "a": 1})
    assert hash_evidence({"a": 1}) != hash_evidence({"a": 2})


def test_a_group_redis_lost_is_made_again_and_the_loss_is_told(redis: Redis) -> None:
    """Issue 39: after Redis lost its data the cached "the group exists" made every read
    fail with NOGROUP for good (164 times in 150 s) and the next alert was never handled."""
    events = IncidentEvents(redis)
    told: list[str] = []
    events.on_lost_group = told.append
    events.publish("incident.opened", "INC-1")
    assert [f["incident_id"] for _, f in events.consume("flow", "c")] == ["INC-1"]
    redis.flushdb()  # the data is gone: the stream and its group with it
    events.publish("incident.opened", "INC-2")  # the next alert after the loss
    for read in (lambda: events.pending("flow", "c"), lambda: events.consume("flow", "c"),
                 lambda: events.claim_stale("flow", "c", 0)):
        read()  # none raises NOGROUP
    redis.flushdb()
    events.publish("incident.opened", "INC-3")
    assert [f["incident_id"] for _, f in events.consume("flow", "c")] == ["INC-3"]
    assert told == ["flow", "flow"]
