"""Owners and deadlines of transient states on a real Redis, and the reconciler's sweep
(a settable clock; the real-process faults are in test_fault_redrive.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from redis import Redis

from bot.core.errors import ConfigError
from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.domain.flow import DiagnosisFinished, RunDiagnosis, StepAbandoned, decide
from bot.domain.incident import Alert, AlertStatus, Incident
from bot.domain.lifecycle import FIRST_DIAGNOSIS, IncidentState, StepDeadlines, StepTaken
from bot.flow.reconcile import RedriveOutcome, reconcile_once, reconcile_settings
from bot.flow.runner import FlowRunner, Handled
from storage import keys
from storage.audit import AuditLog
from storage.incidents import IncidentStore
from storage.inflight import Inflight, step_owner
from tests.helpers.serve_process import dead_owner

S = IncidentState
DEADLINES = StepDeadlines(open_s=10, diagnosing_s=30, acting_s=60)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(redis: Redis, clock: Clock) -> IncidentStore:
    return IncidentStore(redis, group_wait_s=0, clock=clock, deadlines=DEADLINES)


def opened(store: IncidentStore, host: str = "gpu-01") -> str:
    incident, _ = store.open_or_fold(Alert("alertmanager", host, "vram_idle", fingerprint=host))
    return incident.id


def in_set(redis: Redis) -> dict[str, float]:
    return dict(redis.zrange(keys.incidents_inflight(), 0, -1, withscores=True))  # type: ignore[arg-type]


def test_open_diagnosing_settled_moves_the_entry_with_the_state(
        store: IncidentStore, redis: Redis, clock: Clock) -> None:
    iid = opened(store)
    assert store.inflight.get(iid) == Inflight(iid, S.OPEN, "", 1010.0)
    assert in_set(redis) == {iid: 1010.0}
    store.transition(iid, S.DIAGNOSING, "bot", "alert received")
    assert store.inflight.get(iid) == Inflight(iid, S.DIAGNOSING, step_owner(), 1030.0)
    store.transition(iid, S.AWAITING_APPROVAL, "bot", "1 finding")
    assert store.inflight.get(iid) is None and in_set(redis) == {}
    store.transition(iid, S.APPROVED, "UALICE", "approved")
    assert in_set(redis) == {iid: 1060.0}
    store.transition(iid, S.REMEDIATING, "UALICE", "acting", owner="pool-thread")
    assert store.inflight.get(iid) == Inflight(iid, S.REMEDIATING, "pool-thread", 1060.0)
    store.transition(iid, S.VERIFIED, "bot", "ok")
    assert in_set(redis) == {} and not redis.exists(keys.incident_owner(iid))


def test_an_alert_that_ends_takes_the_open_incident_out_of_flight(
        store: IncidentStore, redis: Redis) -> None:
    iid = opened(store)
    store.ingest([Alert("alertmanager", "gpu-01", "vram_idle", AlertStatus.RESOLVED,
                        fingerprint="gpu-01")])
    assert store.require(iid).state is S.RESOLVED
    assert in_set(redis) == {} and store.inflight.get(iid) is None


def test_reentering_diagnosing_is_a_claim_not_an_edge(store: IncidentStore, clock: Clock) -> None:
    iid = opened(store)
    store.transition(iid, S.DIAGNOSING, "bot", "alert received", owner="A")
    again = store.transition(iid, S.DIAGNOSING, "bot", "redelivered", owner="A")  # its own
    assert again.state is S.DIAGNOSING
    with pytest.raises(StepTaken, match="owned by A"):
        store.transition(iid, S.DIAGNOSING, "bot", "duplicate", owner="B")
    assert store.inflight.get(iid).owner == "A"  # type: ignore[union-attr]
    clock.now += 31  # A's deadline passed: B may take the step over
    store.transition(iid, S.DIAGNOSING, "bot", "re-drive", owner="B")
    assert store.inflight.get(iid) == Inflight(iid, S.DIAGNOSING, "B", clock.now + 30)
    actions = [e.action for e in store.audit.timeline(iid)]
    assert actions.count("step.reentered") == 2 and actions.count("transition") == 1
    # a transient state that is not the current one still follows the table
    with pytest.raises(ValueError, match="diagnosing → remediating"):
        store.transition(iid, S.REMEDIATING, "bot", "no")


def test_only_from_refuses_a_late_redelivery(store: IncidentStore) -> None:
    iid = opened(store)
    store.transition(iid, S.DIAGNOSING, "bot", "alert received")
    store.transition(iid, S.AWAITING_APPROVAL, "bot", "done")
    with pytest.raises(StepTaken, match="no longer waiting"):
        store.transition(iid, S.DIAGNOSING, "bot", "stale event", only_from=FIRST_DIAGNOSIS)
    assert store.require(iid).state is S.AWAITING_APPROVAL


def test_renew_moves_the_deadline_only_for_the_owner(
        store: IncidentStore, redis: Redis, clock: Clock) -> None:
    iid = opened(store)
    store.transition(iid, S.DIAGNOSING, "bot", "go", owner="A")
    clock.now += 20
    assert store.inflight.renew(iid, "A", 30)
    assert in_set(redis)[iid] == 1050.0 and store.inflight.get(iid).deadline == 1050.0  # type: ignore[union-attr]
    assert not store.inflight.renew(iid, "B", 300)
    assert not store.inflight.renew(iid, "", 300)
    assert in_set(redis)[iid] == 1050.0


class Calls:
    def __init__(self) -> None:
        self.rediagnosed: list[str] = []
        self.failed: list[tuple[str, str]] = []
        self.published: list[str] = []

    def settle(self, incident_id: str, reason: str) -> bool:
        self.failed.append((incident_id, reason))
        return True

    def publish(self, incident_id: str, evidence: bool = False) -> None:
        """The runner's ``PostMessage`` (the message re-rendered), recorded."""
        self.published.append(incident_id)

    def sweep(self, store: IncidentStore, clock: Clock) -> list[tuple[str, RedriveOutcome]]:
        audit = AuditLog(store.redis)
        # the runner's effects for StepAbandoned: the record and its step (storage), the
        # message (this publisher) and what the sweep does next; nothing else is reached
        runner = FlowRunner(store, self, None, audit, None, None,  # type: ignore[arg-type]
                            clock=clock)
        out = reconcile_once(runner, store, audit, clock, rediagnose=self.rediagnosed.append,
                             settle_action=self.settle, max_attempts=3)
        return [(r.incident_id, r.outcome) for r in out]


def test_a_stuck_diagnosis_is_redriven_then_given_up_with_retry(
        store: IncidentStore, clock: Clock) -> None:
    iid = opened(store)
    store.transition(iid, S.DIAGNOSING, "bot", "alert received", owner="A")
    calls = Calls()
    assert calls.sweep(store, clock) == []  # within its deadline: alive
    for attempt in (1, 2):
        clock.now += 31
        assert calls.sweep(store, clock) == [(iid, RedriveOutcome.REDIAGNOSED)]
        entry = store.inflight.get(iid)
        assert entry == Inflight(iid, S.DIAGNOSING, "", clock.now + 30, attempt)
        # the re-driven diagnosis claims the released step (and dies again)
        store.transition(iid, S.DIAGNOSING, "bot", "re-driven", owner=f"R{attempt}")
        assert store.inflight.get(iid).attempts == attempt  # type: ignore[union-attr]
    assert calls.rediagnosed == [iid, iid]
    clock.now += 31
    assert calls.sweep(store, clock) == [(iid, RedriveOutcome.GAVE_UP)]
    incident = store.require(iid)
    assert incident.state is S.DIAGNOSIS_FAILED and store.inflight.get(iid) is None
    assert incident.last_outcome is not None
    assert incident.last_outcome.summary.startswith("diagnosis interrupted 3 times")
    assert calls.published == [iid]
    redriven = [e.detail for e in store.audit.timeline(iid) if e.action == "incident.redriven"]
    assert [d["attempts"] for d in redriven] == [1, 2]
    assert "deadline passed" in redriven[0]["reason"]


def test_an_open_incident_nobody_picked_up_is_redriven(store: IncidentStore, clock: Clock) -> None:
    iid = opened(store)
    clock.now += 11
    calls = Calls()
    assert calls.sweep(store, clock) == [(iid, RedriveOutcome.REDIAGNOSED)]
    store.transition(iid, S.DIAGNOSING, "bot", "picked up")  # attempts carry into diagnosing
    assert store.inflight.get(iid).attempts == 1  # type: ignore[union-attr]


def test_an_interrupted_action_is_settled_once_never_rerun(store: IncidentStore,
                                                           clock: Clock) -> None:
    iid = opened(store)
    for goal in (S.DIAGNOSING, S.AWAITING_APPROVAL, S.APPROVED, S.REMEDIATING):
        store.transition(iid, goal, "bot", "step", owner="A")
    calls = Calls()
    clock.now += 61
    assert calls.sweep(store, clock) == [(iid, RedriveOutcome.READ_BACK)]
    assert calls.failed == [(iid, "deadline passed 1s ago")] and calls.rediagnosed == []
    clock.now += 1  # the read-back is being recorded: a second sweep leaves it alone
    assert calls.sweep(store, clock) == [] and len(calls.failed) == 1
    store.transition(iid, S.ACTION_FAILED, "bot", "interrupted")  # what a failed read-back does
    assert store.inflight.get(iid) is None


def test_a_dead_owner_is_redriven_before_its_deadline(store: IncidentStore) -> None:
    dead = dead_owner()
    iid = opened(store)
    store.transition(iid, S.DIAGNOSING, "bot", "go", owner=dead)
    calls = Calls()
    assert calls.sweep(store, store.clock) == [(iid, RedriveOutcome.REDIAGNOSED)]  # type: ignore[arg-type]
    detail = [e.detail for e in store.audit.timeline(iid) if e.action == "incident.redriven"]
    assert detail[0]["reason"] == f"owner {dead} is gone"


def test_a_sweep_rechecks_what_it_saw(store: IncidentStore, clock: Clock) -> None:
    iid = opened(store)
    store.transition(iid, S.DIAGNOSING, "bot", "go", owner="A")
    seen = store.inflight.get(iid)
    assert seen is not None
    clock.now += 5
    store.transition(iid, S.DIAGNOSING, "bot", "re-entered by itself", owner="A")  # new deadline
    for event in (StepAbandoned(clock.now, "reconciler", S.DIAGNOSING, 0, "late"),
                  StepAbandoned(clock.now, "reconciler", S.DIAGNOSING, 2, "late")):
        with pytest.raises(StepTaken):  # a re-drive and a give-up of the entry it saw
            store.commit(iid, lambda i, e=event: decide(i, e), expect=seen)
    assert store.require(iid).state is S.DIAGNOSING
    assert store.inflight.get(iid) == replace(seen, deadline=1035.0)  # the step's own


def test_a_leftover_entry_is_dropped(store: IncidentStore, redis: Redis, clock: Clock) -> None:
    iid = opened(store)
    redis.hset(keys.incident(iid), "state", "awaiting_approval")  # an older bot moved it
    clock.now += 11
    assert Calls().sweep(store, clock) == [(iid, RedriveOutcome.DROPPED)]
    assert in_set(redis) == {}


def test_an_entry_whose_incident_is_gone_is_dropped(store: IncidentStore, redis: Redis,
                                                    clock: Clock) -> None:
    """No incident to decide on: the runner drops the entry the sweep saw, nothing else."""
    iid = opened(store)
    redis.delete(keys.incident(iid))
    clock.now += 11
    assert Calls().sweep(store, clock) == [(iid, RedriveOutcome.DROPPED)]
    assert in_set(redis) == {}


def test_reconcile_settings_are_validated() -> None:
    assert reconcile_settings({}).deadlines() == StepDeadlines()
    with pytest.raises(ConfigError, match=r"extra\.reconcile\.every_s"):
        reconcile_settings({"reconcile": {"every_s": 0}})


class LateDiagnosis:
    """A re-driven diagnosis that ends after the incident moved on: while it ran, the
    first one finished and the incident went on to ``awaiting_approval``."""

    def __init__(self, store: IncidentStore) -> None:
        self.store = store

    def run(self, incident: Incident, evidence: bool) -> DiagnosisFinished:
        self.store.transition(incident.id, S.AWAITING_APPROVAL, "bot", "the first one ended")
        late = Diagnosis(incident.host, "vram_idle", DiagnosisStatus.OK, 0.1)
        return DiagnosisFinished(0.0, "bot", late, (), "sha256:late")


def test_a_diagnosis_that_ends_after_its_incident_moved_on_is_stale_not_an_error(
        store: IncidentStore, clock: Clock) -> None:
    """Its outcome no longer applies: nothing of it is written over the newer state, and it
    is not 'an internal error while diagnosing' (the frozen-host run showed that on a card
    whose action had settled)."""
    iid = opened(store)
    store.transition(iid, S.DIAGNOSING, "bot", "alert received")
    audit, calls = AuditLog(store.redis), Calls()
    runner = FlowRunner(store, calls, None, audit, None, LateDiagnosis(store),  # type: ignore[arg-type]
                        clock=clock)
    done = runner._diagnose(Handled(store.require(iid)), RunDiagnosis())
    after = store.require(iid)
    assert done.incident.state is S.AWAITING_APPROVAL and after.state is S.AWAITING_APPROVAL
    assert after.diagnosis is None  # neither the late one nor an error replaced it
    assert not any(e.action == "transition" and e.detail.get("to") == "diagnosis_failed"
                   for e in store.audit.timeline(iid))
