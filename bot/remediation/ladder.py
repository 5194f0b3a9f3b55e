"""The escalation ladder, as one pure function over a verified result.

SIGTERM (waiting TimeoutStopSec) → SIGKILL → GPU reset (only a GPU with no process on
it) → host reboot. Each rung is its own catalog action with its own approval and
verification; ``next_step`` proposes the next one only when the previous one ran and
its verification says it failed. The flow shows the proposal as a new approval.
"""

from __future__ import annotations

from typing import Any

from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome
from bot.remediation.catalog import CATALOG

TERMS = ("process.sigterm", "process.terminate")
PROCESS_KINDS = (*TERMS, "process.sigkill")
_NOT_TRIED = frozenset({Outcome.REFUSED, Outcome.DRY_RUN, Outcome.UNREACHABLE, Outcome.NOOP})


def _step(kind: str, params: dict[str, str], reason: str) -> dict[str, Any]:
    return {"kind": kind, "params": params, "reason": reason, "risk": CATALOG[kind].risk}


def wedged_gpus(evidence: dict[str, Any]) -> list[int]:
    """GPUs still holding memory with no process listed on them."""
    held = [int(i) for i in evidence.get("held") or []]
    busy = {g for h in evidence.get("holders") or [] for g in h.get("gpus", [])}
    return [i for i in held if i not in busy]


def _used(evidence: dict[str, Any], index: int) -> float:
    return next((float(g["used_mib"]) for g in evidence.get("gpus") or []
                 if g["index"] == index), 0.0)


def _owner(result: ActionResult) -> str | None:
    """The unit the process ran under, when its name passes the catalog's grammar."""
    from bot.domain import validate

    procs = result.captured.processes if result.captured else ()
    unit = procs[0].unit if procs else None
    return unit if unit and validate.is_valid(validate.unit_name, unit) else None


def next_step(result: ActionResult) -> dict[str, Any] | None:
    """The next rung after ``result``, or None (it worked, or it was never tried)."""
    v = result.verification
    if result.outcome.ok or result.outcome in _NOT_TRIED or v is None or v.ok:
        return None
    ev = v.evidence
    if result.kind in PROCESS_KINDS:
        pid = result.params["pid"]
        owner = _owner(result)
        if result.outcome is Outcome.RESPAWNED and owner:
            return _step("systemd.stop_disable", {"unit": owner},
                         strings.REM_PROPOSE_STOP.format(pid=pid, unit=owner))
        if result.kind in TERMS and (ev.get("process") or {}).get("alive"):
            params = {"pid": pid, "override": result.params.get("override", "no")}
            return _step("process.sigkill", params, strings.REM_LADDER_KILL.format(pid=pid))
        wedged = wedged_gpus(ev)
        if wedged and not (ev.get("process") or {}).get("alive"):
            gpu = wedged[0]
            return _step("gpu.reset", {"gpu": str(gpu)}, strings.REM_LADDER_RESET.format(
                gpu=gpu, used=f"{_used(ev, gpu):.0f}"))
        return None
    if result.kind == "gpu.reset":
        return _step("host.reboot", {}, strings.REM_LADDER_REBOOT.format(
            gpu=result.params["gpu"], host=result.host))
    return None
