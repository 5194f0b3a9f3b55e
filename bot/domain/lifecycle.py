"""Incident states and the pure transition table (tested over every pair).

open → diagnosing → awaiting_approval | diagnosis_failed | no_action → approved | denied |
expired → remediating → verified | action_failed → resumed → resolved; waiting states can
be snoozed and wake where they were. A follow-up action approved from the same message
(Revert, Resume extraction) goes from verified, action_failed or resumed back to
remediating. The diagram with each state's buttons is in docs/incident-states.md. An
illegal transition raises; it never silently overwrites.

The transient states (open, diagnosing, approved, remediating) are work in progress: each
has an owner and a deadline in storage, and a reconciler re-drives one whose owner is gone
(``bot/flow/reconcile.py``). Re-entering a transient state (diagnosing → diagnosing) is
not an edge of this table but a *claim* on the step, decided by storage from the owner
and the deadline (``StepTaken`` when someone alive holds it): a self-loop here would let
any duplicate delivery start a second diagnosis beside a running one.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    # open → diagnosis_failed: the diagnosis never got going (interrupted too many times)
    S.OPEN: frozenset({S.DIAGNOSING, S.RESOLVED, S.DIAGNOSIS_FAILED}),
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
    # an approved follow-up (Revert, Resume) acts again; a repair that verified but whose
    # health gate then failed (or whose node is a repeat offender) is not back in service
    S.VERIFIED: frozenset({S.RESUMED, S.RESOLVED, S.REMEDIATING, S.ACTION_FAILED}),
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


# --- work in progress: owners, deadlines, re-drives (issue 24) ---------------------------
TRANSIENT = frozenset({S.OPEN, S.DIAGNOSING, S.APPROVED, S.REMEDIATING})
# where a delivered "incident.opened" may still start (or re-drive) the first diagnosis;
# anywhere else it was already diagnosed, and a late redelivery must not do it again
FIRST_DIAGNOSIS = frozenset({S.OPEN, S.DIAGNOSING})
ACTING = frozenset({S.APPROVED, S.REMEDIATING})


def is_transient(state: IncidentState) -> bool:
    return state in TRANSIENT


class StepTaken(IllegalTransition):
    """The step is owned by someone else who is still within their deadline, or the
    incident is no longer where the caller expected: nothing was changed. For a caller it
    is an illegal transition like any other (a second Approve of an approved incident is
    refused the same way whichever check sees it first)."""

    def __init__(self, incident_id: str, state: IncidentState, why: str) -> None:
        ValueError.__init__(self, f"incident {incident_id} ({state.value}): {why}")
        self.current = self.target = state
        self.incident_id = incident_id
        self.state = state


@dataclass(frozen=True)
class StepDeadlines:
    """How long each transient state may last before the reconciler re-drives it.

    ``open_s``: the flow consumer should have picked a new incident up by then.
    ``diagnosing_s``: longer than the slowest diagnosis (probes time out well before).
    ``acting_s``: longer than any action with its verification (the former 900 s rule).
    """

    open_s: float = 120.0
    diagnosing_s: float = 300.0
    acting_s: float = 900.0

    def for_state(self, state: IncidentState) -> float:
        if state is S.OPEN:
            return self.open_s
        if state is S.DIAGNOSING:
            return self.diagnosing_s
        return self.acting_s
