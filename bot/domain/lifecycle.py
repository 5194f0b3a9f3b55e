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


S = IncidentState

TRANSITIONS: dict[IncidentState, frozenset[IncidentState]] = {
    S.OPEN: frozenset({S.DIAGNOSING, S.RESOLVED}),
    S.DIAGNOSING: frozenset({S.AWAITING_APPROVAL, S.RESOLVED, S.FAILED}),
    S.AWAITING_APPROVAL: frozenset({S.APPROVED, S.DENIED, S.EXPIRED, S.RESOLVED, S.DIAGNOSING}),
    S.APPROVED: frozenset({S.REMEDIATING}),
    S.DENIED: frozenset({S.RESOLVED, S.DIAGNOSING}),
    S.EXPIRED: frozenset({S.RESOLVED, S.DIAGNOSING}),
    S.REMEDIATING: frozenset({S.VERIFIED, S.FAILED}),
    # an approved follow-up (Revert, Resume, an alternative after a failure) acts again
    S.VERIFIED: frozenset({S.RESUMED, S.RESOLVED, S.REMEDIATING}),
    S.FAILED: frozenset({S.DIAGNOSING, S.RESOLVED, S.REMEDIATING}),
    S.RESUMED: frozenset({S.RESOLVED, S.FAILED, S.REMEDIATING}),
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
