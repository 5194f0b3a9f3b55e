"""Incident states and the pure transition table (tested over every pair).

open → diagnosing → awaiting_approval | diagnosis_failed | no_action → approved | denied |
expired → remediating → verified | action_failed → resumed → resolved; waiting states can
be snoozed and wake where they were. A follow-up action approved from the same message
(Revert, Resume extraction) goes from verified, action_failed or resumed back to
remediating. The diagram with each state's buttons is in docs/incident-states.md. An
illegal transition raises; it never silently overwrites.
"""

from __future__ import annotations

from enum import StrEnum


class IncidentState(StrEnum):
    OPEN = "open"
    DIAGNOSING = "diagnosing"
    DIAGNOSIS_FAILED = "diagnosis_failed"  # no SSH session (auth, connect, host key): Retry
    NO_ACTION = "no_action"  # findings, but nothing the catalog can run: Resolve
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    REMEDIATING = "remediating"
    VERIFIED = "verified"
    ACTION_FAILED = "action_failed"  # the action or its verification failed: Retry/Escalate
    FAILED = "action_failed"  # the former name, kept as an alias
    RESUMED = "resumed"
    SNOOZED = "snoozed"  # a person asked for quiet until a time; wakes to where it was
    RESOLVED = "resolved"


S = IncidentState
# states a person may snooze, and so the states a snoozed incident wakes back to
SNOOZABLE = frozenset({S.AWAITING_APPROVAL, S.DIAGNOSIS_FAILED, S.NO_ACTION, S.ACTION_FAILED})
MAX_SNOOZE_S = 7 * 86400  # the longest snooze: buttons, ``/ir snooze`` and the store alike

TRANSITIONS: dict[IncidentState, frozenset[IncidentState]] = {
    S.OPEN: frozenset({S.DIAGNOSING, S.RESOLVED}),
    S.DIAGNOSING: frozenset({S.AWAITING_APPROVAL, S.RESOLVED, S.ACTION_FAILED,
                             S.DIAGNOSIS_FAILED, S.NO_ACTION}),
    S.DIAGNOSIS_FAILED: frozenset({S.DIAGNOSING, S.RESOLVED, S.SNOOZED}),
    S.NO_ACTION: frozenset({S.DIAGNOSING, S.RESOLVED, S.SNOOZED}),
    S.AWAITING_APPROVAL: frozenset({S.APPROVED, S.DENIED, S.EXPIRED, S.RESOLVED, S.DIAGNOSING,
                                    S.SNOOZED}),
    # a re-probe that finds the problem gone resolves; a crash before acting is a failure
    S.APPROVED: frozenset({S.REMEDIATING, S.RESOLVED, S.ACTION_FAILED}),
    S.DENIED: frozenset({S.RESOLVED, S.DIAGNOSING}),
    S.EXPIRED: frozenset({S.RESOLVED, S.DIAGNOSING}),
    S.REMEDIATING: frozenset({S.VERIFIED, S.ACTION_FAILED}),
    # an approved follow-up (Revert, Resume) acts again
    S.VERIFIED: frozenset({S.RESUMED, S.RESOLVED, S.REMEDIATING}),
    S.ACTION_FAILED: frozenset({S.DIAGNOSING, S.RESOLVED, S.REMEDIATING, S.SNOOZED}),
    S.RESUMED: frozenset({S.RESOLVED, S.ACTION_FAILED, S.REMEDIATING}),
    S.SNOOZED: frozenset({S.RESOLVED, S.DIAGNOSING} | SNOOZABLE),
    S.RESOLVED: frozenset(),
}


class IllegalTransition(ValueError):
    def __init__(self, current: IncidentState, target: IncidentState) -> None:
        super().__init__(f"illegal incident transition {current.value} → {target.value}")
        self.current = current
        self.target = target


def can_transition(current: IncidentState, target: IncidentState) -> bool:
    return target in TRANSITIONS[current]


def transition(current: IncidentState, target: IncidentState) -> IncidentState:
    """Return ``target`` if allowed from ``current``; raise ``IllegalTransition`` otherwise."""
    if not can_transition(current, target):
        raise IllegalTransition(current, target)
    return target


def is_terminal(state: IncidentState) -> bool:
    return not TRANSITIONS[state]
