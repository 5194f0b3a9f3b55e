"""Verification of the newer catalog kinds: the drop-in, a GPU reset, a reboot request.

The drop-in is proven with ``systemctl show`` (what systemd loaded, not what was
written); a reset by the GPU's memory, twice ``settle_s`` apart.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import replace
from typing import Any

from bot.core import strings
from bot.domain.action_result import Verification
from bot.domain.host_state import CapturedState
from bot.remediation.catalog import PATH_SEP, dropin_path
from bot.remediation.polling import ActionRun, Look, poll
from bot.remediation.probes import (
    ProbeFailed,
    _ok,
    _run,
    parse_size,
    parse_timespan,
    read_disk_avail,
    read_gpu_memory,
    read_journal_bytes,
    regular_files,
)
from playbooks.parsers.systemd import parse_show

DROPIN_PROPS = "Restart,TimeoutStopUSec,DropInPaths,ExecStartPre"


def read_dropins(ctx: ActionRun, unit: str) -> dict[str, str]:
    text = f"systemctl show {shlex.quote(unit)} -p {DROPIN_PROPS}"
    probe = _ok(_run(ctx.runner, ctx.target, "dropins", text, ctx.options.probe_timeout_s))
    return parse_show(probe.stdout)


def verify_dropin(ctx: ActionRun, captured: CapturedState) -> Verification:
    """Installed: systemd lists the file and shows its values. Reverted: the file is gone."""
    unit = captured.units[0]
    path = dropin_path(unit.name)
    props = read_dropins(ctx, unit.name)
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
    index = int(ctx.params["gpu"])
    free = ctx.options.gpu_free_mib

    def look() -> Look:
        gpus = read_gpu_memory(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
        used = next((g.memory_used_mib for g in gpus if g.index == index), None)
        ev = {"gpu": index, "used_mib": used,
              "gpus": [{"index": g.index, "used_mib": g.memory_used_mib} for g in gpus]}
        return Look(used is not None and used < free, None, ev)

    seen, elapsed = poll(ctx, look, patient)
    used = seen.evidence.get("used_mib")
    detail = strings.REM_GPU_RESET.format(gpu=index, used=f"{used:.0f}" if used is not None
                                          else "?")
    return Verification(seen.done, detail, elapsed, evidence=seen.evidence)


def verify_cleanup(ctx: ActionRun, captured: CapturedState) -> Verification:
    """Every file gone, and ``df`` shows at least ``need_bytes`` more available."""
    start = time.monotonic()
    t = ctx.options.probe_timeout_s
    paths = ctx.params["paths"].split(PATH_SEP)
    left = sorted(regular_files(ctx.runner, ctx.target, paths, t))
    after = read_disk_avail(ctx.runner, ctx.target, t)
    gained = {m: after[m] - b for m, b in captured.disk_avail.items() if m in after}
    grew = {m: g for m, g in gained.items() if g > 0}
    freed, need = sum(grew.values()), int(ctx.params["need_bytes"])
    ok = not left and freed >= need
    detail = strings.REM_CLEAN_FREED.format(n=len(paths) - len(left), freed=human(freed),
                                            mounts=", ".join(sorted(grew)) or "no mount",
                                            need=human(need))
    if left:
        detail += "; " + strings.REM_CLEAN_LEFT.format(left=len(left))
    ev = {"freed_bytes": freed, "need_bytes": need, "per_mount": grew, "left": left[:20],
          "avail_before": captured.disk_avail, "avail_after": after}
    return Verification(ok, detail, time.monotonic() - start, evidence=ev)


def verify_journal(ctx: ActionRun, captured: CapturedState) -> Verification:
    start = time.monotonic()
    after = read_journal_bytes(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
    limit = parse_size(ctx.params["size"]) or 0
    before = captured.journal_bytes
    ok = after is not None and (after <= limit or (before is not None and after < before))
    detail = strings.REM_JOURNAL.format(before=human(before), after=human(after),
                                        limit=ctx.params["size"])
    ev = {"before_bytes": before, "after_bytes": after, "limit_bytes": limit}
    return Verification(ok, detail, time.monotonic() - start, evidence=ev)


def human(n: int | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"  # pragma: no cover


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
