"""Prove the effect: poll until it holds (and keeps holding), or say what stands in the way.

For GPU actions that means every affected GPU under ``gpu_free_mib``, checked twice
``settle_s`` apart, because a unit with ``Restart=always`` or a watchdog comes back
within a second. When the GPUs stay held, the report names the holder: the same unit
under a new PID (a respawn) or another unit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bot.core import fmt, strings
from bot.domain.action_result import Verification
from bot.domain.host_state import CapturedState, GpuHolder, GpuState, UnitState
from bot.remediation import rma
from bot.remediation.capture import subject_pids
from bot.remediation.catalog import PATH_SEP, dropin_path
from bot.remediation.polling import ActionRun, Look, poll
from bot.remediation.probe_runner import ProbeFailed
from bot.remediation.readings import (
    read_disk_usage,
    read_dropins,
    read_gpu_memory,
    read_gpus,
    read_journal_bytes,
    read_process,
    read_unit,
    regular_files,
)
from bot.remediation.slurm import verify_slurm
from playbooks.parsers.common import size_bytes
from playbooks.parsers.systemd import parse_timespan

# --- the newer kinds: the drop-in, a GPU reset, a cleanup, the journal, a reboot ------


def verify_dropin(ctx: ActionRun, captured: CapturedState) -> Verification:
    """Installed: systemd lists the file and shows its values. Reverted: the file is gone."""
    unit = captured.units[0]
    path = dropin_path(unit.name)
    props = read_dropins(ctx.runner, ctx.target, unit.name, ctx.options.probe_timeout_s)
    paths = props.get("DropInPaths", "").split()
    timeout = parse_timespan(props.get("TimeoutStopUSec", ""), -1.0)
    if ctx.spec.kind == "systemd.dropin":
        ok = (path in paths and props.get("Restart") == "on-failure"
              and timeout == float(ctx.params["timeout_stop_s"]))
    else:
        ok = path not in paths
    before: dict[str, Any] = {"restart": unit.restart, "timeout_stop_s": unit.timeout_stop_s}
    detail = strings.REM_DROPIN_NOW.format(unit=unit.name, restart=props.get("Restart", "?"),
                                           timeout=props.get("TimeoutStopUSec", "?"),
                                           paths=", ".join(paths) or "none")
    return Verification(ok, detail, evidence={"show": props, "before": before, "path": path})


def verify_gpu_reset(ctx: ActionRun, captured: CapturedState, patient: bool) -> Verification:
    """``bot.remediation.gpu_reset.verify``: GPUs free, daemons back, the gate's level 1."""
    from bot.remediation import gpu_reset

    return gpu_reset.verify(ctx, captured, patient)


def verify_cleanup(ctx: ActionRun, captured: CapturedState) -> Verification:
    """Every file gone, and the mount that alerted under its threshold (``mount`` and
    ``full_pct``): never verified while that mount stays above it, whatever was freed.
    Without a mount (a cleanup typed by hand) ``df`` must show ``need_bytes`` more free."""
    start = time.monotonic()
    t = ctx.options.probe_timeout_s
    paths = ctx.params["paths"].split(PATH_SEP)
    left = sorted(regular_files(ctx.runner, ctx.target, paths, t))
    usage = read_disk_usage(ctx.runner, ctx.target, t)
    after = {m: avail for m, (_, avail) in usage.items()}
    gained = {m: after[m] - b for m, b in captured.disk_avail.items() if m in after}
    grew = {m: g for m, g in gained.items() if g > 0}
    freed, need = sum(grew.values()), int(ctx.params["need_bytes"])
    ev: dict[str, Any] = {"freed_bytes": freed, "need_bytes": need, "per_mount": grew,
                          "left": left[:20], "avail_before": captured.disk_avail,
                          "avail_after": after}
    mount = ctx.params.get("mount", "")
    if mount and mount in usage:
        ok, detail = _mount_below(ctx, mount, usage[mount], grew.get(mount, 0), ev)
        ok = ok and not left
    else:
        ok = not left and freed >= need
        detail = strings.REM_CLEAN_FREED.format(files=fmt.counted(len(paths) - len(left), "file"),
                                                freed=fmt.size(freed),
                                                mounts=", ".join(sorted(grew)) or "no mount",
                                                need=fmt.size(need))
    if left:
        detail += "; " + strings.REM_CLEAN_LEFT.format(left=fmt.counted(len(left), "file"))
    return Verification(ok, detail, time.monotonic() - start, evidence=ev)


def _mount_below(ctx: ActionRun, mount: str, usage: tuple[int, int], freed: int,
                 ev: dict[str, Any]) -> tuple[bool, str]:
    """Is ``mount`` under ``full_pct`` now; the partial result says how far and what next."""
    used, avail = usage
    full = int(ctx.params.get("full_pct") or 0) or 100
    pct = math.ceil(used * 100 / (used + avail)) if used + avail else 0  # as df rounds
    still = max(0, used - int((used + avail) * full / 100))
    ev.update(mount=mount, used_pct_after=round(pct, 2), full_pct=full, still_need_bytes=still,
              freed_on_mount=freed, partial=still > 0)
    if still == 0:
        return True, strings.REM_CLEAN_FREED.format(
            files=fmt.counted(len(ctx.params["paths"].split(PATH_SEP)), "file"),
            freed=fmt.size(freed), mounts=mount,
            need=fmt.size(int(ctx.params["need_bytes"]))) + "; " + strings.REM_CLEAN_BELOW.format(
            mount=mount, pct=pct, full=full)
    return False, strings.REM_CLEAN_PARTIAL.format(
        freed=fmt.size(freed), needed=fmt.size(freed + still), mount=mount, pct=pct, full=full,
        next=strings.REM_CLEAN_NEXT.format(mount=mount))


def verify_journal(ctx: ActionRun, captured: CapturedState) -> Verification:
    start = time.monotonic()
    after = read_journal_bytes(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
    limit = size_bytes(ctx.params["size"]) or 0
    before = captured.journal_bytes
    ok = after is not None and (after <= limit or (before is not None and after < before))
    detail = strings.REM_JOURNAL.format(before=fmt.size(before), after=fmt.size(after),
                                        limit=ctx.params["size"])
    ev = {"before_bytes": before, "after_bytes": after, "limit_bytes": limit}
    return Verification(ok, detail, time.monotonic() - start, evidence=ev)


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
    ev = {**v.evidence, "gpus_after": after}
    return replace(v, detail=f"{v.detail}; {note}", evidence=ev)


def verify_reboot(ctx: ActionRun) -> Verification:
    """A reboot is proven later (host back, new boot id): this only records the request."""
    return Verification(False, strings.REM_REBOOT_SENT.format(host=ctx.target.name),
                        evidence={"pending": "host back with a new boot id"})


# --- GPU-freeing kinds: units and processes --------------------------------------------

def gpu_range(indexes: list[int] | tuple[int, ...]) -> str:
    """[0..7] → "0-7"; [0, 2] → "0,2" (what an operator would type into nvidia-smi -i)."""
    s = sorted(indexes)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}-{s[-1]}"
    return ",".join(str(i) for i in s)


def gpu_detail(gpus: list[GpuState], affected: tuple[int, ...], free_mib: float) -> str:
    chosen = [g for g in gpus if g.index in affected]
    free = [g for g in chosen if g.memory_used_mib < free_mib]
    top = max((g.memory_used_mib for g in chosen), default=0.0)
    return strings.REM_GPUS_FREE.format(free=len(free), total=len(affected), max=f"{top:.0f}")


def unit_goal(kind: str, params: dict[str, str]) -> Callable[[UnitState], bool]:
    """The unit state each systemd action aims for."""
    if kind == "systemd.stop_disable":
        return lambda u: not u.running and not u.enabled
    if kind in ("systemd.mask", "systemd.mask_force"):
        return lambda u: not u.running and u.masked
    want_file, want_active = params["unit_file_state"], params["active_state"] == "active"
    return lambda u: u.unit_file_state.startswith(want_file) and u.running == want_active


def _held(gpus: list[GpuState], affected: tuple[int, ...], free_mib: float) -> list[int]:
    return [g.index for g in gpus if g.index in affected and g.memory_used_mib >= free_mib]


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


def verify_unit(ctx: ActionRun, captured: CapturedState, patient: bool = True) -> Verification:
    before = captured.units[0]
    goal = unit_goal(ctx.spec.kind, ctx.params)
    free = ctx.options.gpu_free_mib
    affected = captured.affected_gpus(subject_pids(captured), free) if ctx.spec.frees_gpus else ()
    show_gpus = ctx.spec.frees_gpus and bool(captured.gpus)  # evidence even when none affected
    t = ctx.options.probe_timeout_s

    def look() -> Look:
        unit = read_unit(ctx.runner, ctx.target, before.name, t)
        gpus = read_gpu_memory(ctx.runner, ctx.target, t) if show_gpus else []
        held = _held(gpus, affected, free)
        ev = {"unit": _unit_evidence(unit), **_gpu_evidence(gpus, affected), "held": held}
        new_pid = unit.running and unit.main_pid and unit.main_pid not in subject_pids(captured)
        respawn = (strings.REM_RESPAWN_UNIT.format(unit=unit.name, pid=unit.main_pid,
                                                   was=before.main_pid or "-")
                   if new_pid and ctx.spec.frees_gpus else None)
        return Look(goal(unit) and not held, respawn, ev)

    window = restart_window(ctx, before)
    seen, elapsed = poll(ctx, look, patient, window)
    seen = _with_window(seen, elapsed, window, before.name)
    return _conclude(ctx, seen, elapsed, affected, before.name, subject_pids(captured), before.name)


def _with_window(seen: Look, elapsed: float, window: float, unit: str | None) -> Look:
    if not window:
        return seen
    ev = {**seen.evidence, "restart_window_s": round(window, 3), "checked_after_s":
          round(elapsed, 3), "window_note": strings.REM_WINDOW.format(
              secs=elapsed, unit=unit, window=round(window, 3))}
    return replace(seen, evidence=ev)


def verify_process(ctx: ActionRun, captured: CapturedState, patient: bool = True) -> Verification:
    before = captured.processes[0]
    free = ctx.options.gpu_free_mib
    affected = captured.affected_gpus({before.pid}, free)
    t = ctx.options.probe_timeout_s

    def look() -> Look:
        proc = read_process(ctx.runner, ctx.target, str(before.pid), t)
        gpus = read_gpu_memory(ctx.runner, ctx.target, t) if captured.gpus else []
        held = _held(gpus, affected, free)
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
    wait = _term_wait(ctx, owner)
    seen, elapsed = poll(ctx, look, patient, window, wait)
    seen = _with_window(seen, elapsed, window, before.unit)
    return _conclude(ctx, seen, elapsed, affected, f"PID {before.pid}", {before.pid}, before.unit)


def _term_wait(ctx: ActionRun, owner: UnitState | None) -> float | None:
    """SIGTERM alone: give the process its unit's TimeoutStopSec (else the grace) to exit."""
    if ctx.spec.kind != "process.sigterm":
        return None
    if owner is not None:
        return min(owner.timeout_stop_s, 600.0)
    return ctx.options.term_grace_s


def _conclude(ctx: ActionRun, seen: Look, elapsed: float, affected: tuple[int, ...],
              subject: str, own: set[int], own_unit: str | None) -> Verification:
    ev = dict(seen.evidence)
    gpus = [GpuState(g["index"], "", g["used_mib"], 0.0) for g in ev.get("gpus", [])]
    shown = affected or tuple(g.index for g in gpus)
    gdetail = gpu_detail(gpus, shown, ctx.options.gpu_free_mib) if shown else ""
    if seen.done:
        return Verification(True, gdetail or _state_detail(ev, subject), elapsed, evidence=ev)
    respawn = seen.respawn
    held = ev.get("held") or []
    if held:
        holders, uuids = _holders_on(ctx, held)
        ev["holders"] = _describe_holders(holders, uuids)
        others = [h for h in holders if h.pid not in own and h.unit != own_unit]
        again = [h for h in holders if h.pid not in own and own_unit and h.unit == own_unit]
        ev["held_by_others"] = bool(others)
        if again and respawn is None:
            respawn = strings.REM_RESPAWN_UNIT.format(unit=own_unit, pid=again[0].pid,
                                                      was=min(own) if own else "-")
    detail = _not_done_detail(ev, subject, gdetail)
    if respawn:
        detail = f"{respawn}; {detail}" if detail else respawn
    return Verification(False, detail, elapsed, respawned=respawn is not None, evidence=ev)


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
    """The verification each kind of action needs, after it ran."""
    kind = ctx.spec.kind
    if kind.startswith("slurm."):
        return verify_slurm(ctx, captured, patient)
    if kind == "systemd.revert":
        return with_gpu_report(ctx, verify_unit(ctx, captured, patient))
    if kind.startswith("systemd.dropin"):
        return verify_dropin(ctx, captured)
    if kind.startswith("systemd."):
        return verify_unit(ctx, captured, patient)
    if kind.startswith("process."):
        return verify_process(ctx, captured, patient)
    if kind == "gpu.reset":
        return verify_gpu_reset(ctx, captured, patient)
    if kind == "host.reboot":
        return verify_reboot(ctx)
    if kind == "rma.handoff":
        return rma.verify(ctx)
    if kind == "disk.cleanup":
        return verify_cleanup(ctx, captured)
    return verify_journal(ctx, captured)
