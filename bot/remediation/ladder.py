"""The escalation ladder: after a verified failure, the next rung, as one pure function.

SIGTERM (waiting TimeoutStopSec) → SIGKILL → GPU reset (only a GPU with no process on
it) → host reboot. Each rung is its own action with its own approval and verification;
``next_step`` proposes the next one only when the previous one ran and its verification
says it failed, and the action that failed says which rung follows it
(``Action.next_rung``). The flow shows the proposal as a new approval.
"""

from __future__ import annotations

from typing import Any

from bot.domain import validate
from bot.domain.action_result import ActionResult, Outcome
from bot.remediation.actions.registry import find

# nothing ran, or nothing is known of what it did: no next rung on that
_NOT_TRIED = frozenset({Outcome.REFUSED, Outcome.DRY_RUN, Outcome.UNREACHABLE, Outcome.NOOP,
                        Outcome.COULD_NOT_CHECK})


def wedged_gpus(evidence: dict[str, Any]) -> list[int]:
    """GPUs still holding memory with no process listed on them."""
    held = [int(i) for i in evidence.get("held") or []]
    busy = {g for h in evidence.get("holders") or [] for g in h.get("gpus", [])}
    return [i for i in held if i not in busy]


def used_mib(evidence: dict[str, Any], index: int) -> float:
    return next((float(g["used_mib"]) for g in evidence.get("gpus") or []
                 if g["index"] == index), 0.0)


def owner_unit(result: ActionResult) -> str | None:
    """The unit the process ran under, when its name passes the unit grammar."""
    procs = result.captured.processes if result.captured else ()
    unit = procs[0].unit if procs else None
    return unit if unit and validate.is_valid(validate.unit_name, unit) else None


def next_step(result: ActionResult) -> dict[str, Any] | None:
    """The next rung after ``result``, or None (it worked, or it was never tried)."""
    v = result.verification
    if result.outcome.ok or result.outcome in _NOT_TRIED or v is None or v.ok:
        return None
    action = find(result.kind)
    return action.next_rung(result) if action is not None else None
