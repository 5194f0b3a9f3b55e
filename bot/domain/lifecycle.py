"""Incident states and the pure transition table (tested over every pair).

open → diagnosing → awaiting_approval → approved | denied | expired → remediating
→ verified | failed → resumed → resolved. A follow-up action approved from the same
message (Revert, Resume extraction, an alternative after a failure) goes from verified,
failed or resumed back to remediating. An illegal transition raises; it never silently
overwrites.
"""

from __future__ import annotations

from enum import StrEnum


class IncidentState(StrEnum):
    OPEN = "open"
    DIAGNOSING = "diagnosing"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    REMEDIATING = "remediating"
    VERIFIED = "verified"
    FAILED = "failed"
    RESUMED = "resumed"
    RESOLVED = "resolved"


TRANSITIONS: dict[IncidentState, frozenset[IncidentState]] = {
    IncidentState.OPEN: frozenset({IncidentState.DIAGNOSING, IncidentState.RESOLVED}),
    IncidentState.DIAGNOSING: frozenset({
        IncidentState.AWAITING_APPROVAL, IncidentState.RESOLVED, IncidentState.FAILED,
    }),
    IncidentState.AWAITING_APPROVAL: frozenset({
        IncidentState.APPROVED, IncidentState.DENIED, IncidentState.EXPIRED,
        IncidentState.RESOLVED, IncidentState.DIAGNOSING,
    }),
    IncidentState.APPROVED: frozenset({IncidentState.REMEDIATING}),
    IncidentState.DENIED: frozenset({IncidentState.RESOLVED, IncidentState.DIAGNOSING}),
    IncidentState.EXPIRED: frozenset({IncidentState.RESOLVED, IncidentState.DIAGNOSING}),
    IncidentState.REMEDIATING: frozenset({IncidentState.VERIFIED, IncidentState.FAILED}),
    # an approved follow-up (Revert, Resume, an alternative after a failure) acts again
    IncidentState.VERIFIED: frozenset({
        IncidentState.RESUMED, IncidentState.RESOLVED, IncidentState.REMEDIATING,
    }),
    IncidentState.FAILED: frozenset({
        IncidentState.DIAGNOSING, IncidentState.RESOLVED, IncidentState.REMEDIATING,
    }),
    IncidentState.RESUMED: frozenset({
        IncidentState.RESOLVED, IncidentState.FAILED, IncidentState.REMEDIATING,
    }),
    IncidentState.RESOLVED: frozenset(),
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
