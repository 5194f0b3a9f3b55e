"""The state rule over every (recorded state, RQ status, liveness) combination."""

from __future__ import annotations

import itertools

import pytest

from bot.jobs.states import FINAL, JobState, derive_state, status_from_fields

S = JobState
RQ = [
    None,
    "queued",
    "scheduled",
    "deferred",
    "started",
    "finished",
    "failed",
    "stopped",
    "canceled",
]


def expected(recorded: JobState, rq: str | None, alive: bool) -> JobState:
    if recorded in FINAL:
        return recorded
    if rq in ("queued", "scheduled", "deferred"):
        return S.PAUSED if recorded is S.PAUSED else S.QUEUED
    if rq == "started":
        return S.RUNNING if alive else S.INTERRUPTED
    if rq == "failed":
        return S.PAUSED if recorded is S.PAUSED else S.FAILED
    return S.INTERRUPTED if recorded in (S.RUNNING, S.QUEUED) else recorded


@pytest.mark.parametrize(("recorded", "rq", "alive"), list(itertools.product(S, RQ, [True, False])))
def test_every_combination(recorded: JobState, rq: str | None, alive: bool) -> None:
    age = 1.0 if alive else 100.0
    assert derive_state(recorded, rq, age, 10.0) == expected(recorded, rq, alive)


def test_started_without_heartbeat_is_interrupted() -> None:
    assert derive_state(S.RUNNING, "started", None, 10.0) is S.INTERRUPTED
    assert derive_state(S.RUNNING, "started", 10.0, 10.0) is S.RUNNING


def test_status_from_fields_hides_rate_unless_running() -> None:
    fields = {
        "id": "ex-1",
        "state": "running",
        "done": "5",
        "total": "10",
        "rate": "1.5",
        "eta_s": "3",
        "updated_at": "100",
        "partial_removed": "1",
        "corrupt_recomputed": "2",
    }
    live = status_from_fields(fields, "started", 101.0, 10.0)
    assert (live.state, live.rate, live.eta_s) == (S.RUNNING, 1.5, 3.0)
    assert live.repaired == {"partial_removed": 1, "corrupt_recomputed": 2}
    dead = status_from_fields(fields, "started", 200.0, 10.0)
    assert (dead.state, dead.rate, dead.eta_s, dead.done) == (S.INTERRUPTED, None, None, 5)
    assert status_from_fields({"id": "x", "done": "junk"}, None, 0, 1).done == 0
