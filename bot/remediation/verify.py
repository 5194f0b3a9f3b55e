"""Prove the effect: poll until it holds (and keeps holding), or say what stands in the way.

For GPU actions that means every affected GPU under ``gpu_free_mib``, checked twice
``settle_s`` apart, because a unit with ``Restart=always`` or a watchdog comes back
within a second. When the GPUs stay held, the report names the holder: the same unit
under a new PID (a respawn) or another unit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bot.core import strings
from bot.domain.action_result import Seen, Verification
from bot.domain.host_state import CapturedState, GpuHolder, GpuState, UnitState
from bot.remediation.capture import subject_pids
from bot.remediation.polling import ActionRun, Look, poll
from bot.remediation.probe_runner import ProbeFailed
from bot.remediation.readings import read_gpu_memory, read_gpus, read_process, read_unit
from bot.ssh.base import SSHError


def with_gpu_report(ctx: ActionRun, v: Verification) -> Verification:
    """After a revert: is the memory taken again? Evidence, not a condition."""
    try:
        gpus = read_gpu_memory(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
    except ProbeFailed:
        return v
    if not gpus:
        return v
    held = [g for g in gpus if g.memory_used_mib >= ctx.options.gpu_free_mib]
    top = max(g.memory_used_mib for g in gpus)
    note = strings.REM_GPUS_HELD.format(held=len(held), total=len(gpus), max=f"{top:.0f}")
    after = [{"index": g.index, "used_mib": g.memory_used_mib} for g in gpus]
    ev = {**v.evidence, "gpus_after": after, "held_after": len(held)}
    return replace(v, detail=f"{v.detail}; {note}", evidence=ev)


# --- GPU-freeing kinds: units and processes --------------------------------------------

def gpu_range(indexes: list[int] | tuple[int, ...]) -> str:
    """[0..7] → "0-7"; [0, 2] → "0,2" (what an operator would type into nvidia-smi -i)."""
    s = sorted(indexes)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}-{s[-1]}"
    return ",".join(str(i) for i in s)


def gpu_detail(gpus: list[GpuState], affected: tuple[int, ...], free_mib: float,
               others: dict[int, float] | None = None) -> str:
    """"8/8 GPUs free (max 0 MiB)"; where other holders had memory on the affected GPUs
    before the action, counted on what the subject held: "8/8 GPUs free of it"."""
    others = others or {}
    chosen = [g for g in gpus if g.index in affected]
    free = [g for g in chosen if g.memory_used_mib < free_mib + others.get(g.index, 0.0)]
    if any(others.get(g.index) for g in chosen):
        return strings.REM_GPUS_FREE_OF_IT.format(free=len(free), total=len(affected))
    top = max((g.memory_used_mib for g in chosen), default=0.0)
    return strings.REM_GPUS_FREE.format(free=len(free), total=len(affected), max=f"{top:.0f}")


def others_on(captured: CapturedState, own: set[int], own_unit: str | None
              ) -> dict[int, float]:
    """GPU index → MiB that holders other than the action's subject held on it before the
    action (a user's sweep beside the unit being stopped): not the action's to free, so
    verify judges each GPU on what the subject held, never on a neighbour's memory. A
    holder under the subject's own unit is the subject's (a respawn counts against it)."""
    index = {g.uuid: g.index for g in captured.gpus}
    out: dict[int, float] = {}
    for h in captured.holders:
        if h.pid in own or (own_unit and h.unit == own_unit) or h.gpu_uuid not in index:
            continue
        out[index[h.gpu_uuid]] = out.get(index[h.gpu_uuid], 0.0) + h.used_mib
    return out


def _held(gpus: list[GpuState], affected: tuple[int, ...], free_mib: float,
          others: dict[int, float] | None = None) -> list[int]:
    """The affected GPUs still holding more than other holders had on them before."""
    others = others or {}
    return [g.index for g in gpus if g.index in affected
            and g.memory_used_mib >= free_mib + others.get(g.index, 0.0)]


def _gpu_evidence(gpus: list[GpuState], affected: tuple[int, ...]) -> dict[str, Any]:
    return {"affected": list(affected),
            "gpus": [{"index": g.index, "used_mib": g.memory_used_mib} for g in gpus]}


def restart_window(ctx: ActionRun, unit: UnitState | None) -> float:
    """How long to keep looking before "done" counts: systemd's restart delay plus a margin.

    A unit with ``Restart=`` other than ``no`` is started again ``RestartUSec`` after its
    process dies; a look before that sees free GPUs that are about to be taken again.
    """
    if unit is None or not unit.restarts or not ctx.spec.frees_gpus:
        return 0.0
    return min(unit.restart_s, 600.0) + ctx.options.restart_margin_s


def _holders_on(ctx: ActionRun, held: list[int]) -> tuple[list[GpuHolder], dict[str, int]]:
    """Who holds the still-held GPUs (uuid → index for the report)."""
    gpus, holders = read_gpus(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
    uuids = {g.uuid: g.index for g in gpus if g.index in held}
    return [h for h in holders if h.gpu_uuid in uuids], uuids


def _describe_holders(holders: list[GpuHolder], uuids: dict[str, int]) -> list[dict[str, Any]]:
    by_pid: dict[int, dict[str, Any]] = {}
    for h in holders:
        entry = by_pid.setdefault(h.pid, {"pid": h.pid, "unit": h.unit, "gpus": []})
        entry["gpus"].append(uuids[h.gpu_uuid])
    return sorted(by_pid.values(), key=lambda e: e["pid"])


def verify_unit(ctx: ActionRun, captured: CapturedState, goal: Callable[[UnitState], bool],
                patient: bool = True) -> Verification:
    """Poll the unit until it is as ``goal`` wants (the action's own aim) and the GPUs it
    held are free, past the unit's restart window; else say who holds them."""
    before = captured.units[0]
    free = ctx.options.gpu_free_mib
    affected = captured.affected_gpus(subject_pids(captured), free) if ctx.spec.frees_gpus else ()
    others = others_on(captured, subject_pids(captured), before.name)
    show_gpus = ctx.spec.frees_gpus and bool(captured.gpus)  # evidence even when none affected
    t = ctx.options.probe_timeout_s

    def look() -> Look:
        unit = read_unit(ctx.runner, ctx.target, before.name, t)
        gpus = read_gpu_memory(ctx.runner, ctx.target, t) if show_gpus else []
        held = _held(gpus, affected, free, others)
        ev = {"unit": _unit_evidence(unit), **_gpu_evidence(gpus, affected), "held": held}
        new_pid = unit.running and unit.main_pid and unit.main_pid not in subject_pids(captured)
        respawn = (strings.REM_RESPAWN_UNIT.format(unit=unit.name, pid=unit.main_pid,
                                                   was=before.main_pid or "-")
                   if new_pid and ctx.spec.frees_gpus else None)
        return Look(goal(unit) and not held, respawn, ev)

    window = restart_window(ctx, before)
    seen, elapsed = poll(ctx, look, patient, window)
    seen = _with_window(seen, elapsed, window, before.name)
    return _conclude(ctx, seen, elapsed, affected, before.name, subject_pids(captured), before.name,
                     others)


def _with_window(seen: Look, elapsed: float, window: float, unit: str | None) -> Look:
    if not window:
        return seen
    ev = {**seen.evidence, "restart_window_s": round(window, 3), "checked_after_s":
          round(elapsed, 3), "window_note": strings.REM_WINDOW.format(
              secs=elapsed, unit=unit, window=round(window, 3))}
    return replace(seen, evidence=ev)


def verify_process(ctx: ActionRun, captured: CapturedState, patient: bool = True, *,
                   term_only: bool = False) -> Verification:
    """Poll until the process is gone and the GPUs it held are free, past its unit's
    restart window. ``term_only``: SIGTERM alone was sent, so the process gets its unit's
    TimeoutStopSec (else the grace) to exit first."""
    before = captured.processes[0]
    free = ctx.options.gpu_free_mib
    affected = captured.affected_gpus({before.pid}, free)
    others = others_on(captured, {before.pid}, None)
    t = ctx.options.probe_timeout_s

    def look() -> Look:
        proc = read_process(ctx.runner, ctx.target, str(before.pid), t)
        gpus = read_gpu_memory(ctx.runner, ctx.target, t) if captured.gpus else []
        held = _held(gpus, affected, free, others)
        ev = {"process": {"pid": proc.pid, "alive": proc.alive}, **_gpu_evidence(gpus, affected),
              "held": held}
        respawn = None
        if not proc.alive and held and before.unit:
            holders, _ = _holders_on(ctx, held)
            again = [h for h in holders if h.unit == before.unit and h.pid != before.pid]
            if again:
                respawn = strings.REM_RESPAWN_UNIT.format(unit=before.unit, pid=again[0].pid,
                                                          was=before.pid)
        return Look(not proc.alive and not held, respawn, ev)

    owner = captured.owner(before.unit)
    window = restart_window(ctx, owner)
    wait = _term_wait(ctx, owner) if term_only else None
    seen, elapsed = poll(ctx, look, patient, window, wait)
    seen = _with_window(seen, elapsed, window, before.unit)
    return _conclude(ctx, seen, elapsed, affected, f"PID {before.pid}", {before.pid}, before.unit,
                     others)


def _term_wait(ctx: ActionRun, owner: UnitState | None) -> float:
    """SIGTERM alone: give the process its unit's TimeoutStopSec (else the grace) to exit."""
    if owner is not None:
        return min(owner.timeout_stop_s, 600.0)
    return ctx.options.term_grace_s


def _conclude(ctx: ActionRun, seen: Look, elapsed: float, affected: tuple[int, ...],
              subject: str, own: set[int], own_unit: str | None,
              others: dict[int, float] | None = None) -> Verification:
    ev = dict(seen.evidence)
    gpus = [GpuState(g["index"], "", g["used_mib"], 0.0) for g in ev.get("gpus", [])]
    shown = affected or tuple(g.index for g in gpus)
    gdetail = gpu_detail(gpus, shown, ctx.options.gpu_free_mib, others) if shown else ""
    if seen.done:
        detail = gdetail or _state_detail(ev, subject)
        still = _still_others(ctx, gpus, ctx.options.gpu_free_mib, own, own_unit)
        if still:
            ev["others_still"] = still
            detail = f"{detail}; {_others_words(still)}"
        return Verification(Seen.FIXED, detail, elapsed, evidence=ev)
    respawn = seen.respawn
    held = ev.get("held") or []
    if held:
        holders, uuids = _holders_on(ctx, held)
        ev["holders"] = _describe_holders(holders, uuids)
        strangers = [h for h in holders if h.pid not in own and h.unit != own_unit]
        again = [h for h in holders if h.pid not in own and own_unit and h.unit == own_unit]
        ev["held_by_others"] = bool(strangers)
        if again and respawn is None:
            respawn = strings.REM_RESPAWN_UNIT.format(unit=own_unit, pid=again[0].pid,
                                                      was=min(own) if own else "-")
    detail = _not_done_detail(ev, subject, gdetail)
    if respawn:
        detail = f"{respawn}; {detail}" if detail else respawn
    return Verification(Seen.NOT_FIXED, detail, elapsed, respawned=respawn is not None,
                        evidence=ev)


def _still_others(ctx: ActionRun, gpus: list[GpuState], free_mib: float, own: set[int],
                  own_unit: str | None) -> list[dict[str, Any]]:
    """After a fix: who else still holds GPUs (a look, not the action's concern): each
    holder with its GPUs and memory, the biggest first. Nothing when every GPU is free."""
    held = [g.index for g in gpus if g.memory_used_mib >= free_mib]
    if not held:
        return []
    holders, uuids = _holders_on(ctx, held)
    by_pid: dict[int, dict[str, Any]] = {}
    for h in holders:
        if h.pid in own or (own_unit and h.unit == own_unit):
            continue
        entry = by_pid.setdefault(h.pid, {"pid": h.pid, "unit": h.unit, "gpus": [],
                                          "used_mib": 0.0})
        entry["gpus"].append(uuids[h.gpu_uuid])
        entry["used_mib"] += h.used_mib
    return sorted(by_pid.values(), key=lambda e: -e["used_mib"])


def _others_words(still: list[dict[str, Any]]) -> str:
    who = "; ".join(strings.REM_OTHER_HOLDER.format(
        pid=h["pid"], unit=f" ({h['unit']})" if h["unit"] else "", gpus=gpu_range(h["gpus"]),
        gib=f"{h['used_mib'] / 1024:.1f}") for h in still[:4])
    return strings.REM_OTHERS_STILL.format(who=who)


def _state_detail(ev: dict[str, Any], subject: str) -> str:
    unit = ev.get("unit")
    if not unit:
        return strings.REM_STATE_OK
    return strings.REM_UNIT_NOW.format(unit=subject, active=unit["active_state"],
                                       file=unit["unit_file_state"] or "-")


def _not_done_detail(ev: dict[str, Any], subject: str, gdetail: str) -> str:
    parts = []
    unit = ev.get("unit")
    if unit:
        parts.append(strings.REM_UNIT_NOW.format(unit=subject, active=unit["active_state"],
                                                 file=unit["unit_file_state"] or "-"))
    proc = ev.get("process")
    if proc and proc["alive"]:
        parts.append(strings.REM_PROC_ALIVE.format(pid=proc["pid"]))
    holders = ev.get("holders") or []
    if holders:
        who = "; ".join(strings.REM_HOLDER.format(pid=h["pid"], unit=h["unit"] or "no unit",
                                                  gpus=gpu_range(h["gpus"])) for h in holders)
        parts.append(strings.REM_HELD_BY.format(who=who))
    elif ev.get("held"):
        parts.append(strings.REM_HELD.format(gpus=gpu_range(ev["held"])))
    if gdetail:
        parts.append(gdetail)
    return "; ".join(parts)


def _unit_evidence(unit: UnitState) -> dict[str, Any]:
    return {"active_state": unit.active_state, "sub_state": unit.sub_state,
            "unit_file_state": unit.unit_file_state, "main_pid": unit.main_pid,
            "pids": list(unit.pids)}


def verify(ctx: ActionRun, captured: CapturedState, patient: bool = True) -> Verification:
    """The verification the action needs, after it ran (``Action.verify``): what it saw
    (fixed or not fixed), or, when the host could not be read (a probe that did not
    answer, the connection refused or lost, a host key that changed), could not check,
    with what failed. A verify that raised is never a verdict on the effect."""
    start = time.monotonic()
    try:
        return ctx.spec.verify(ctx, captured, patient)
    except ProbeFailed as exc:
        return Verification.could_not_check(str(exc), time.monotonic() - start)
    except SSHError as exc:
        return Verification.could_not_check(str(exc), time.monotonic() - start)
