"""The state machine over every (from, to) pair, and the incident record's round trip."""

from __future__ import annotations

import itertools

import pytest

from bot.domain.findings import Severity
from bot.domain.incident import Alert, Incident, apply_transition, fold, parse_severity
from bot.domain.incident_record import ChatRefs, LostCard
from bot.domain.lifecycle import (
    TRANSITIONS,
    IllegalTransition,
    IncidentState,
    can_transition,
    is_terminal,
)

S = IncidentState
ALLOWED = {
    (S.OPEN, S.DIAGNOSING),
    (S.OPEN, S.RESOLVED),
    (S.OPEN, S.DIAGNOSIS_FAILED),  # the reconciler gives up on a never-started diagnosis
    (S.DIAGNOSING, S.AWAITING_APPROVAL),
    (S.DIAGNOSING, S.RESOLVED),
    (S.DIAGNOSING, S.FAILED),
    (S.AWAITING_APPROVAL, S.APPROVED),
    (S.AWAITING_APPROVAL, S.DENIED),
    (S.AWAITING_APPROVAL, S.EXPIRED),
    (S.AWAITING_APPROVAL, S.RESOLVED),
    (S.AWAITING_APPROVAL, S.DIAGNOSING),
    (S.APPROVED, S.REMEDIATING),
    (S.DENIED, S.RESOLVED),
    (S.DENIED, S.DIAGNOSING),
    (S.EXPIRED, S.RESOLVED),
    (S.EXPIRED, S.DIAGNOSING),
    (S.REMEDIATING, S.VERIFIED),
    (S.REMEDIATING, S.FAILED),
    (S.VERIFIED, S.RESUMED),
    (S.VERIFIED, S.RESOLVED),
    (S.FAILED, S.DIAGNOSING),
    (S.FAILED, S.RESOLVED),
    (S.RESUMED, S.RESOLVED),
    (S.RESUMED, S.FAILED),
    # follow-up actions approved from the same message (Revert, Resume, an alternative)
    (S.VERIFIED, S.REMEDIATING),
    (S.VERIFIED, S.FAILED),  # the health gate after a verified repair failed (issue 36)
    (S.FAILED, S.REMEDIATING),
    (S.RESUMED, S.REMEDIATING),
    # the unhappy paths and snoozing
    (S.DIAGNOSING, S.DIAGNOSIS_FAILED),
    (S.DIAGNOSING, S.NO_ACTION),
    (S.DIAGNOSIS_FAILED, S.DIAGNOSING),
    (S.DIAGNOSIS_FAILED, S.RESOLVED),
    (S.NO_ACTION, S.DIAGNOSING),
    (S.NO_ACTION, S.RESOLVED),
    (S.APPROVED, S.RESOLVED),
    (S.APPROVED, S.ACTION_FAILED),
    *((s, S.SNOOZED) for s in (S.AWAITING_APPROVAL, S.DIAGNOSIS_FAILED, S.NO_ACTION,
                               S.ACTION_FAILED)),
    *((S.SNOOZED, s) for s in (S.AWAITING_APPROVAL, S.DIAGNOSIS_FAILED, S.NO_ACTION,
                               S.ACTION_FAILED, S.DIAGNOSING, S.RESOLVED)),
}
PAIRS = list(itertools.product(IncidentState, IncidentState))


def test_table_covers_every_state() -> None:
    assert set(TRANSITIONS) == set(IncidentState)


@pytest.mark.parametrize(("current", "target"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_every_pair(current: IncidentState, target: IncidentState) -> None:
    incident = Incident(id="INC-1", host="gpu-01", kind="vram_idle", state=current)
    if (current, target) in ALLOWED:
        assert can_transition(current, target)
        moved = apply_transition(incident, target, now=50.0)
        assert moved.state is target and moved.updated == 50.0
        assert incident.state is current  # pure: the input is untouched
    else:
        assert not can_transition(current, target)
        with pytest.raises(IllegalTransition, match=f"{current.value} → {target.value}"):
            apply_transition(incident, target, now=50.0)


def test_only_resolved_is_terminal() -> None:
    assert [s for s in IncidentState if is_terminal(s)] == [S.RESOLVED]


def test_resolving_stamps_time_and_clears_fingerprints() -> None:
    incident = Incident(id="INC-1", host="h", kind="disk_full", fingerprints=("a", "b"))
    done = apply_transition(incident, S.RESOLVED, now=99.0)
    assert done.resolved_at == 99.0 and done.fingerprints == () and not done.is_open


def test_hash_round_trip_keeps_every_field() -> None:
    incident = Incident(
        id="INC-7",
        host="gpu-01",
        kind="vram_idle",
        state=S.AWAITING_APPROVAL,
        summary="s",
        severity=Severity.CRITICAL,
        count=3,
        first_seen=1.5,
        last_seen=2.5,
        updated=3.0,
        parent_id="INC-2",
        hosts=("gpu-01", "gpu-02"),
        fingerprints=("f",),
        labels={"a": "b"},
        details={"gpus": [1, 2]},
        chat=ChatRefs("C1", "1.2", "1.2"),
        lost_card=LostCard("INC-3", 1.25),
        acked_by="UALICE",
        source="agent",
        accepted=("ap1", "ap2"),
    )
    raw = incident.to_hash()
    assert all(isinstance(v, str) for v in raw.values())
    assert Incident.from_hash(raw) == incident


def test_fold_counts_and_keeps_the_worst_severity() -> None:
    first = Incident.open_from(
        "INC-1",
        Alert(
            "webhook",
            "h",
            "disk_full",
            fingerprint="a",
            severity=Severity.CRITICAL,
            labels={"mount": "/"},
        ),
        now=10.0,
    )
    again = fold(
        first,
        Alert(
            "webhook",
            "h",
            "disk_full",
            fingerprint="b",
            summary="new",
            severity=Severity.INFO,
            details={"pct": 99},
            labels={"mount": "/data"},
        ),
        now=20.0,
    )
    assert (again.count, again.first_seen, again.last_seen) == (2, 10.0, 20.0)
    assert again.severity is Severity.CRITICAL and again.summary == "new"
    assert again.labels == {"mount": "/"}  # what it was opened for
    assert again.fingerprints == ("a", "b") and again.details == {"pct": 99}


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("critical", Severity.CRITICAL),
        ("PAGE", Severity.CRITICAL),
        ("info", Severity.INFO),
        ("warning", Severity.WARNING),
        ("", Severity.WARNING),
        ("bogus", Severity.WARNING),
    ],
)
def test_severity_parsing(text: str, level: Severity) -> None:
    assert parse_severity(text) is level
