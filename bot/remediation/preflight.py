"""Preflight: before anything changes, can this action succeed, and should it run at all?

Checked on the captured state plus a few read-only probes: the unit exists; a mask can
succeed (a unit whose own file is in /etc cannot be masked without losing the file);
a terminate does not fight systemd (a process under a ``Restart=`` unit comes back, so
the unit is proposed instead); a GPU reset has no process on that GPU; ``sudo -n -l``
allows every command. A refusal says why and what to do instead; nothing ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.core import strings
from bot.domain.host_state import CapturedState, UnitState
from bot.remediation import catalog, gpu_reset
from bot.remediation.catalog import RemoteStep
from bot.remediation.polling import ActionRun
from bot.remediation.probe_runner import run_probes, tool_words
from playbooks import probes

GPU_LADDER = ("process.terminate", "process.sigterm", "process.sigkill")
CRON_UNITS = ("cron.service", "crond.service")  # a job's process: its crontab line restarts it


@dataclass(frozen=True)
class Refusal:
    reason: str
    proposals: tuple[dict[str, Any], ...] = ()


def proposal(kind: str, params: dict[str, str], reason: str) -> dict[str, Any] | None:
    """An alternative as plain data (the flow turns it into a button); None when its
    parameters fail the catalog's grammar (a hostile unit name is never proposed)."""
    spec = catalog.get(kind)
    try:
        clean = spec.validate(params)
    except catalog.ActionRefused:
        return None
    return {"kind": kind, "params": clean, "reason": reason, "risk": spec.risk}


def _some(*items: dict[str, Any] | None) -> tuple[dict[str, Any], ...]:
    return tuple(i for i in items if i is not None)


def restarting_owner(ctx: ActionRun, captured: CapturedState) -> UnitState | None:
    """The unit that would start this PID again, for the ladder's process actions."""
    if ctx.spec.kind not in GPU_LADDER or not captured.processes:
        return None
    owner = captured.owner(captured.processes[0].unit)
    return owner if owner is not None and owner.restarts else None


def _unit_checks(ctx: ActionRun, captured: CapturedState) -> Refusal | None:
    unit = captured.units[0]
    if not unit.exists:
        return Refusal(strings.REM_UNIT_MISSING.format(unit=unit.name, host=ctx.target.name))
    if ctx.spec.kind == "systemd.mask" and unit.file_in_etc and not unit.masked:
        p = {"unit": unit.name}
        return Refusal(strings.REM_MASK_ETC.format(unit=unit.name, path=unit.fragment_path), _some(
            proposal("systemd.stop_disable", p, strings.REM_PROPOSE_STOP.format(
                pid=unit.main_pid or "-", unit=unit.name)),
            proposal("systemd.dropin", p, strings.REM_PROPOSE_DROPIN.format(unit=unit.name)),
            proposal("systemd.mask_force", p,
                     strings.REM_PROPOSE_MASK_FORCE.format(unit=unit.name))))
    return None


def _process_checks(ctx: ActionRun, captured: CapturedState) -> Refusal | None:
    if ctx.params.get("override") == "yes" or ctx.spec.kind not in GPU_LADDER:
        return None
    proc = captured.processes[0]
    if proc.alive and proc.unit and captured.owner(proc.unit) is None:
        return Refusal(strings.REM_OWNER_UNREADABLE.format(pid=proc.pid))
    cron = captured.owner(proc.unit) if proc.unit in CRON_UNITS else None
    if cron is not None and cron.main_pid != proc.pid:
        return Refusal(strings.REM_TERM_CRON.format(pid=proc.pid, unit=cron.name))
    owner = restarting_owner(ctx, captured)
    if owner is None:
        return None
    pid = captured.processes[0].pid
    if owner.fragment_path.startswith("docker:"):
        cid = owner.fragment_path.removeprefix("docker:")
        return Refusal(strings.REM_TERM_CONTAINER.format(pid=pid, cid=cid[:12],
                                                         policy=owner.restart))
    why = strings.REM_TERM_RESPAWNS.format(pid=pid, unit=owner.name, restart=owner.restart,
                                           secs=owner.restart_s)
    return Refusal(why, _some(proposal("systemd.stop_disable", {"unit": owner.name},
                                       strings.REM_PROPOSE_STOP.format(pid=pid, unit=owner.name))))


def _gpu_checks(ctx: ActionRun, captured: CapturedState) -> Refusal | None:
    """The GPU exists and no process uses it; then ``gpu_reset.checks``: an NVSwitch
    baseboard before Hopper resets only as a whole (NVIDIA's Fabric Manager user guide,
    "GPU reset": GPUs and NVSwitches together, Fabric Manager stopped around it; NVIDIA's
    own tooling does it that way, NVIDIA/gpu-driver-container#909, ai-cloud-validation#603;
    a fabric left half-reset needs another reset or a reboot, NVIDIA/nccl#1488), and every
    client of /dev/nvidia* must be one the reset stops and starts again."""
    if ctx.params["gpu"] != catalog.ALL_GPUS:
        index = int(ctx.params["gpu"])
        gpu = next((g for g in captured.gpus if g.index == index), None)
        if gpu is None:
            return Refusal(strings.REM_GPU_UNKNOWN.format(gpu=index, host=ctx.target.name))
        pids = sorted({h.pid for h in captured.holders if h.gpu_uuid == gpu.uuid})
        if pids:
            return Refusal(strings.REM_GPU_IN_USE.format(gpu=index,
                                                         pids=", ".join(map(str, pids))))
    refused = gpu_reset.checks(ctx, captured)
    return Refusal(refused[0], refused[1]) if refused is not None else None


def sudo_check(ctx: ActionRun, steps: tuple[RemoteStep, ...]) -> Refusal | None:
    """``sudo -n -l CMD...`` for every command: exit 0 means the rules allow it as written."""
    if not ctx.target.sudo or not steps:
        return None
    asks = [probes.sudo_allows(s.name, s.argv) for s in steps]
    answers = run_probes(ctx.runner, ctx.target, asks, ctx.options.probe_timeout_s)
    for step, (probe, _) in zip(steps, answers, strict=True):
        if not probe.ok:
            return Refusal(strings.REM_SUDO_DENIED.format(
                host=ctx.target.name, command=step.text(True), why=tool_words(probe)
                or "not allowed"))
    return None


def check(ctx: ActionRun, captured: CapturedState, steps: tuple[RemoteStep, ...]) -> Refusal | None:
    """The first reason not to run, or None: then every step may be sent."""
    if captured.units:
        refusal = _unit_checks(ctx, captured)
        if refusal:
            return refusal
    if captured.processes:
        refusal = _process_checks(ctx, captured)
        if refusal:
            return refusal
    if ctx.spec.kind == "gpu.reset":
        refusal = _gpu_checks(ctx, captured)
        if refusal:
            return refusal
    if ctx.spec.kind == "disk.cleanup":
        refusal = _cleanup_checks(ctx)
        if refusal:
            return refusal
    if captured.slurm is not None:
        from bot.remediation.slurm import checks as slurm_checks

        refusal = slurm_checks(ctx, captured)
        if refusal:
            return refusal
    return sudo_check(ctx, steps)


def _cleanup_checks(ctx: ActionRun) -> Refusal | None:
    """Every path: inside the host's prefixes, outside paused/queued job output, a regular
    file, open in no process. One bad path refuses the whole action."""
    from bot.remediation.cleanup import open_files, under
    from bot.remediation.readings import regular_files

    o, host = ctx.options, ctx.target.name
    paths = ctx.params["paths"].split(catalog.PATH_SEP)
    for path in paths:
        if not under(path, o.allowed_prefixes):
            return Refusal(strings.REM_CLEAN_OUTSIDE.format(
                path=path, host=host, prefixes=", ".join(o.allowed_prefixes) or "none"))
        guarded = next((d for d in o.protected_dirs if under(path, [d])), None)
        if guarded:
            return Refusal(strings.REM_CLEAN_PROTECTED.format(path=path, dir=guarded))
    files = regular_files(ctx.runner, ctx.target, paths, o.probe_timeout_s)
    missing = next((p for p in paths if p not in files), None)
    if missing:
        return Refusal(strings.REM_CLEAN_NOT_FILE.format(path=missing, host=host))
    busy = open_files(ctx.runner, ctx.target, paths, o.probe_timeout_s)
    if busy:
        return Refusal(strings.REM_CLEAN_OPEN.format(path=sorted(busy)[0]))
    return None
