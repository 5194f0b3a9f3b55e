"""The incident store on a real Redis: atomic batches, transitions, races between replicas."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import replace

import pytest
from redis import Redis

from bot.domain.incident import RECOVERED, Alert, AlertStatus, IncidentSchemaError
from bot.domain.incident_record import ChatRefs, StepResult
from bot.domain.lifecycle import IllegalTransition, IncidentState
from storage import keys
from storage.audit import hash_evidence
from storage.connection import connect
from storage.incidents import AlertSilenced, IncidentStore, UnknownIncident
from storage.ingest import IdBlocks
from storage.silences import SilenceStore
from storage.stores import Stores

S = IncidentState


def fire(host: str, kind: str = "vram_idle", fp: str = "", ident: str | None = None) -> Alert:
    return Alert(
        "alertmanager", host, kind, summary=f"{kind} on {host}", fingerprint=fp, identity=ident
    )


@pytest.fixture
def store(redis: Redis) -> IncidentStore:
    return IncidentStore(redis, group_wait_s=30.0)


def test_needs_a_decoding_client(redis_url: str) -> None:
    with pytest.raises(ValueError, match="decode_responses"):
        IncidentStore(connect(redis_url, decode=False))


def test_open_fold_and_read_back(store: IncidentStore) -> None:
    incident, created = store.open_or_fold(fire("gpu-01", fp="a"))
    again, created_again = store.open_or_fold(fire("gpu-01", fp="b"))
    assert created and not created_again and incident.id == again.id == "INC-1"
    assert again.count == 2 and again.fingerprints == ("a", "b")
    assert store.require("INC-1") == again
    assert [i.id for i in store.list(open_only=True)] == ["INC-1"]
    with pytest.raises(UnknownIncident):
        store.require("INC-404")


def test_group_parent_lists_children(store: IncidentStore) -> None:
    result = store.ingest([fire(f"h{i}") for i in range(5)])
    assert result.counts() == {"created": 1, "grouped": 4}
    parent = store.require("INC-1")
    assert parent.hosts == ("h0", "h1", "h2", "h3", "h4")
    assert [c.host for c in store.children("INC-1")] == ["h1", "h2", "h3", "h4"]
    assert store.events.count("incident.opened") == 1
    assert store.events.count("incident.grouped") == 4


def test_transition_is_audited_and_illegal_ones_change_nothing(store: IncidentStore) -> None:
    store.open_or_fold(fire("gpu-01"))
    evidence = hash_evidence({"gpus": [{"used_mib": 75800, "util": 0}]})
    moved = store.transition(
        "INC-1", "diagnosing", actor="bot", reason="playbook vram_idle", evidence_hash=evidence
    )
    assert moved.state is S.DIAGNOSING and store.require("INC-1").state is S.DIAGNOSING
    with pytest.raises(IllegalTransition):
        store.transition("INC-1", S.REMEDIATING, actor="mallory", reason="skip approval")
    timeline = store.audit.timeline("INC-1")
    assert [(e.actor, e.action) for e in timeline] == [
        ("alertmanager", "opened"),
        ("bot", "transition"),
    ]
    assert timeline[1].detail == {
        "from": "open",
        "to": "diagnosing",
        "reason": "playbook vram_idle",
    }
    assert timeline[1].evidence_hash == evidence and evidence.startswith("sha256:")
    assert store.require("INC-1").state is S.DIAGNOSING
    with pytest.raises(UnknownIncident):
        store.transition("INC-9", S.DIAGNOSING, actor="bot", reason="x")


def test_resolving_frees_host_and_kind(store: IncidentStore, redis: Redis) -> None:
    store.open_or_fold(fire("gpu-01", fp="a"))
    store.transition("INC-1", S.RESOLVED, actor="U123", reason="fixed by hand")
    assert redis.get(keys.incident_by_host_kind("gpu-01", "vram_idle")) is None
    assert redis.get(keys.alert_incident("a")) is None
    assert store.list(open_only=True) == []
    incident, created = store.open_or_fold(fire("gpu-01", fp="a"))
    assert created and incident.id == "INC-2"
    assert [e[1]["type"] for e in store.events.read()][-2:] == [
        "incident.resolved",
        "incident.opened",
    ]


def test_resolve_by_fingerprint(store: IncidentStore) -> None:
    store.ingest([fire("gpu-01", "disk_full", fp="root"), fire("gpu-01", "disk_full", fp="data")])
    partial = store.resolve_by_fingerprint("root")
    assert partial is not None and partial.state is S.OPEN and partial.fingerprints == ("data",)
    done = store.resolve_by_fingerprint("data")
    assert done is not None and done.state is S.RESOLVED and done.resolved_at
    assert store.resolve_by_fingerprint("never-seen") is None


def test_a_reopened_incident_is_closed_by_the_resolve_of_the_alert_still_firing(
        store: IncidentStore) -> None:
    """Issue 39's chaos stall: an incident re-opened after a data loss kept the lost one's
    first fingerprint, whose alert had resolved while the data was gone (that resolve is
    never sent again). The next alert on the host folded in; its resolve left the stale
    fingerprint, so the incident stayed open for good. Re-opened, any of its alerts
    resolving closes it; an ordinary incident still waits for all of them."""
    reopened = Alert(RECOVERED, "gpu-01", "vram_idle", summary="vram_idle on gpu-01",
                     fingerprint="lost-16")
    store.ingest([reopened, fire("gpu-01", fp="live-40")])
    incident = store.require("INC-1")
    assert incident.source == RECOVERED and incident.fingerprints == ("lost-16", "live-40")
    done = store.resolve_by_fingerprint("live-40")
    assert done is not None and done.state is S.RESOLVED and done.fingerprints == ()
    # the same two alerts on an ordinary incident: the first resolve only clears its own
    store.ingest([fire("gpu-02", fp="a-16"), fire("gpu-02", fp="a-40")])
    partial = store.resolve_by_fingerprint("a-40")
    assert partial is not None and partial.state is S.OPEN and partial.fingerprints == ("a-16",)


def test_numbers_are_never_handed_out_again_after_redis_lost_its_data(redis: Redis) -> None:
    """Redis restarted empty: the counter starts again at 0, but a replica whose block ran
    out never reuses a number it handed out (old messages' buttons name them)."""
    blocks = IdBlocks(redis, size=4, margin=100)
    before = [next(blocks) for _ in range(6)]  # two blocks: INC-1..4, INC-5..8
    redis.flushall()
    after = [next(blocks) for _ in range(4)]
    assert before[:2] == ["INC-1", "INC-2"] and not set(before) & set(after)
    assert after[:2] == ["INC-7", "INC-8"]  # the block in hand is still unused numbers
    assert after[2] == "INC-109"  # past the highest reserved (8) plus the margin


def test_every_incident_store_of_a_process_draws_from_one_block(redis: Redis) -> None:
    """A store built later (each component builds its own) and first used after Redis lost
    its data took INC-1 from the emptied counter, a number already on a message."""
    stores = Stores(redis, redis)
    first = stores.incidents().ingest([fire("gpu-01")]).outcomes[0][1]
    redis.flushall()
    second = stores.incidents().ingest([fire("gpu-02")]).outcomes[0][1]
    assert (first, second) == ("INC-1", "INC-2")


def test_update_changes_only_what_the_function_changed(store: IncidentStore) -> None:
    store.open_or_fold(fire("gpu-01"))
    chat = ChatRefs("C1", "1.2", "1.2")
    store.update("INC-1", lambda i: replace(i, chat=chat))
    merged = store.update("INC-1", lambda i: replace(i, acked_by="UALICE"))
    assert merged.chat == chat and merged.acked_by == "UALICE"
    assert store.require("INC-1") == merged


def test_a_version_1_record_reads_its_meta_as_typed_parts(store: IncidentStore,
                                                           redis: Redis) -> None:
    """A record written before the typed parts (one free-form ``meta`` JSON) still reads."""
    store.open_or_fold(fire("gpu-01"))
    meta = {"chat": {"channel": "C1", "ts": "1.2"}, "acked": "UALICE", "job": "ex-0123456789ab",
            "snoozed": {"by": "UBOB", "until": 5.0, "from": "awaiting_approval"},
            "result": {"summary": "stop timed out"}, "results": [{"ok": False, "text": "x"}],
            "running": {"kind": "systemd.stop_disable", "by": "UALICE", "at": 1.0}}
    redis.hdel(keys.incident("INC-1"), "schema")
    redis.hset(keys.incident("INC-1"), "meta", json.dumps(meta))
    old = store.require("INC-1")
    assert old.chat == ChatRefs("C1", "1.2", "1.2") and old.acked_by == "UALICE"
    assert old.job_id == "ex-0123456789ab" and old.snooze is not None
    assert old.snooze.by == "UBOB" and old.last_outcome is not None
    assert old.last_outcome.summary == "stop timed out"
    assert old.results == (StepResult(False, "x"),) and old.running is not None
    moved = store.transition("INC-1", IncidentState.DIAGNOSING, "test", "re-read")
    assert store.require("INC-1") == moved and moved.acked_by == "UALICE"


def test_a_record_from_a_newer_bot_fails_with_a_clear_error(store: IncidentStore,
                                                            redis: Redis) -> None:
    store.open_or_fold(fire("gpu-01"))
    redis.hset(keys.incident("INC-1"), "schema", "99")
    with pytest.raises(IncidentSchemaError, match="schema 99; this bot reads up to 2"):
        store.require("INC-1")


def test_silenced_alert_is_refused(store: IncidentStore, redis: Redis) -> None:
    silences = SilenceStore(redis)
    silences.add("gpu-01", "*", 60, author="alice", reason="maintenance")
    with pytest.raises(AlertSilenced):
        store.open_or_fold(fire("gpu-01"))
    assert store.list() == []
    assert silences.active_for("gpu-01", "disk_full") is not None
    assert [s.author for s in silences.list()] == ["alice"]
    assert silences.remove("gpu-01", "*", actor="alice")
    assert store.open_or_fold(fire("gpu-01"))[1]
    assert [e.action for e in store.audit.recent()][:2] == ["silence.added", "silence.removed"]


def test_silence_validation(redis: Redis) -> None:
    silences = SilenceStore(redis)
    for args, match in [
        (("*", "*", 60, "a"), "not both"),
        (("h;x", "k", 60, "a"), "host"),
        (("h", "k", 0, "a"), "duration"),
        (("h", "k", 60, " "), "author"),
    ]:
        with pytest.raises(ValueError, match=match):
            silences.add(*args)  # type: ignore[arg-type]


def test_two_replicas_apply_each_delivery_once(redis_url: str, redis: Redis) -> None:
    """HA Alertmanagers hit both replicas with the same deliveries, concurrently."""
    stores = [IncidentStore(connect(redis_url)), IncidentStore(connect(redis_url))]
    hosts = [f"h{i:02d}" for i in range(20)]
    deliveries = [fire(h, fp=f"{h}-{n}", ident=f"{h}-{n}") for h in hosts for n in range(5)]
    errors: list[BaseException] = []

    def send(store: IncidentStore, offset: int) -> None:
        try:
            for i in range(0, len(deliveries), 7):
                store.ingest(deliveries[(i + offset) % len(deliveries) :][:7])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(stores[t % 2], t * 3)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    incidents = stores[0].list()
    assert sorted(i.host for i in incidents) == hosts  # one incident per host
    assert all(i.count == 5 for i in incidents)  # each delivery counted exactly once
    (parent,) = [i for i in incidents if i.parent_id is None]  # one group, one parent
    assert sorted(parent.hosts) == hosts
    assert stores[0].events.count("incident.opened") == 1


def test_concurrent_decisions_one_wins(redis_url: str, redis: Redis) -> None:
    store = IncidentStore(redis)
    store.open_or_fold(fire("gpu-01"))
    store.transition("INC-1", S.DIAGNOSING, "bot", "diagnose")
    store.transition("INC-1", S.AWAITING_APPROVAL, "bot", "ask")
    results: Counter[str] = Counter()
    lock = threading.Lock()

    def decide(target: S) -> None:
        try:
            IncidentStore(connect(redis_url)).transition("INC-1", target, f"user-{target}", "click")
            outcome = target.value
        except IllegalTransition:
            outcome = "refused"
        with lock:
            results[outcome] += 1

    threads = [
        threading.Thread(target=decide, args=(S.APPROVED if i % 2 else S.DENIED,))
        for i in range(10)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["refused"] == 9 and results["approved"] + results["denied"] == 1
    final = store.require("INC-1").state
    assert final.value in results
    actions = [e.action for e in store.audit.timeline("INC-1")]
    assert actions.count("transition") == 3


def test_status_resolved_alert_round_trip(store: IncidentStore) -> None:
    store.ingest([fire("gpu-01", fp="x", ident="f1")])
    result = store.ingest(
        [
            Alert(
                "alertmanager",
                "gpu-01",
                "vram_idle",
                AlertStatus.RESOLVED,
                fingerprint="x",
                identity="r1",
            )
        ]
        * 2
    )
    assert result.counts() == {"resolved": 1, "duplicate": 1}
    assert store.require("INC-1").state is S.RESOLVED
