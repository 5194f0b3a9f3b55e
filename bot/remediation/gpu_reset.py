"""``gpu.reset``: clear every client of the device files, reset, start them again, and prove
it with the health gate's first level.

- Capture: the state of everything the reset's ``release`` list names (units through
  ``systemctl show``, containers through ``docker inspect``): only what ran is stopped,
  and only what was stopped is started again, also when the reset fails.
- Preflight (``checks``): no compute process on the GPU (or on any, for ``all``); no GPU
  of an NVSwitch baseboard before Hopper reset alone (the refusal proposes every GPU, Fabric
  Manager stopped around it); and every client of /dev/nvidia* read now is in the release
  list, or the refusal names it and proposes the reset that stops it too (a dcgm-exporter
  container started since the diagnosis, a ladder's reset that only knew the units).
- Verify: each reset GPU under ``gpu_free_mib``, every stopped daemon running again, and
  the gate's readings level passing with no new Xid since the reset began.
"""

from __future__ import annotations

import time
from typing import Any

from bot.core import strings
from bot.domain.action_result import Verification
from bot.domain.host_state import CapturedState, UnitState
from bot.remediation import catalog
from bot.remediation.catalog import ALL_GPUS, GPU_HOLDER_UNITS, released
from bot.remediation.polling import ActionRun, Look, poll
from bot.remediation.probe_runner import ProbeFailed, run_probe, run_probes
from bot.remediation.readings import read_gpu_memory, read_unit
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks import probes
from playbooks.base import PlaybookOptions, Probe, cmd
from playbooks.commands import FABRIC_MANAGER_COMMAND
from playbooks.device_clients import (
    DeviceClient,
    ReleasePlan,
    clients,
    docker_names,
    pre_hopper_nvswitch,
    release_plan,
)
from playbooks.health_gate import GateLevel, GatePolicy, run_gate
from playbooks.parsers import ps

Proposal = dict[str, Any]
LEVEL_1 = GatePolicy(levels=(GateLevel.READINGS,))


def owner_key(kind: str, name: str) -> str:
    """How a release subject's captured state is named among the owners."""
    return name if kind == "unit" else f"container:{name}"


def read_container_state(runner: SSHRunner, target: SSHTarget, name: str,
                         timeout_s: float) -> UnitState:
    """A container as a unit-like state: running or not, its restart policy."""
    fmt = "{{.State.Running}} {{.HostConfig.RestartPolicy.Name}}"
    result, text = run_probe(runner, target, Probe(
        "container_state", cmd("docker", "inspect", "--format", fmt, name), str), timeout_s)
    words = text.split() if result.ok else []
    if not words:
        return UnitState(f"container:{name}", load_state="not-found")
    running = words[0] == "true"
    return UnitState(f"container:{name}", load_state="loaded",
                     active_state="active" if running else "inactive",
                     restart=words[1] if len(words) > 1 else "", fragment_path=f"docker:{name}")


def capture_release(runner: SSHRunner, target: SSHTarget, params: dict[str, str],
                    timeout_s: float) -> tuple[UnitState, ...]:
    """The state of everything the reset stops and starts again, before it runs."""
    return tuple(read_unit(runner, target, name, timeout_s) if kind == "unit"
                 else read_container_state(runner, target, name, timeout_s)
                 for kind, name in released(params))


def read_clients(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> list[DeviceClient]:
    """Every live process holding /dev/nvidia* now, with its unit or container."""
    states = Probe("process_states", "ps -eo pid=,stat=,comm=", ps.parse_states)
    (users, pids), (_, st), (cg, units), (_, boxes) = run_probes(runner, target, [
        probes.gpu_device_users(), states, probes.pid_units(), docker_names()], timeout_s)
    if users.exit_status not in (0, 1) or users.timed_out:  # lsof: 1 when nobody holds them
        raise ProbeFailed(users, "could not list who holds /dev/nvidia*")
    if not cg.ok:
        raise ProbeFailed(cg, "could not read the processes' cgroups")
    return clients(pids, st, units, boxes)


def _proposal(params: dict[str, str], reason: str) -> Proposal | None:
    spec = catalog.get("gpu.reset")
    try:
        clean = spec.validate(params)
    except catalog.ActionRefused:
        return None
    return {"kind": "gpu.reset", "params": clean, "reason": reason, "risk": spec.risk}


def _given(params: dict[str, str]) -> set[str]:
    return {f"{k}:{n}" for k, n in released(params)}


def checks(ctx: ActionRun, captured: CapturedState) -> tuple[str, tuple[Proposal, ...]] | None:
    """Why this reset must not run now, and what to approve instead (None: it may run)."""
    gpu, host, t = ctx.params["gpu"], ctx.target.name, ctx.options.probe_timeout_s
    every = gpu == ALL_GPUS
    if every:
        pids = sorted({h.pid for h in captured.holders})
        if pids:
            return strings.REM_GPU_ALL_IN_USE.format(pids=", ".join(map(str, pids[:8]))), ()
    _, fm_state = run_probe(ctx.runner, ctx.target, Probe(
        "fabric_manager", FABRIC_MANAGER_COMMAND, str.strip), t)
    xml_result, xml = run_probe(ctx.runner, ctx.target, probes.gpu_xml(), t)
    together = xml_result.ok and pre_hopper_nvswitch(xml.gpus, fm_state)
    plan = release_plan(read_clients(ctx.runner, ctx.target, t), all_gpus=every or together,
                        compute={h.pid for h in captured.holders})
    if together and not every:
        why = strings.REM_GPU_NVSWITCH_ALONE.format(host=host, gpu=gpu)
        return why, _alternative(host, plan, strings.GPU_RESET_WHY_NVSWITCH)
    if plan.blocking:
        return strings.GPU_RESET_BLOCKED.format(
            who=", ".join(c.words for c in plan.blocking[:4])), ()
    missing = [c for c in plan.named if c.subject not in _given(ctx.params)
               and not _legacy_covers(ctx.params, c)]
    if missing:
        why = strings.REM_GPU_CLIENTS_NOT_RELEASED.format(
            who=", ".join(c.words for c in missing[:6]), gpu=gpu)
        alt = _proposal({"gpu": gpu, "release": plan.param}, strings.REM_PROPOSE_RESET_CLEARING
                        .format(gpu=gpu, stops=", ".join(c.words for c in plan.named)))
        return why, tuple(p for p in (alt,) if p is not None)
    return None


def _legacy_covers(params: dict[str, str], c: DeviceClient) -> bool:
    """A reset without a release list stops the NVIDIA daemons' units by name."""
    return not params.get("release") and c.unit in GPU_HOLDER_UNITS


def _alternative(host: str, plan: ReleasePlan, why: str) -> tuple[Proposal, ...]:
    stops = ", ".join(c.words for c in plan.named) or strings.GPU_RESET_NOTHING_TO_STOP
    alt = _proposal({"gpu": ALL_GPUS, "release": plan.param},
                    strings.GPU_PROPOSE_RESET_ALL.format(host=host, why=why, stops=stops))
    return tuple(p for p in (alt,) if p is not None)


def verify(ctx: ActionRun, captured: CapturedState, patient: bool,
           started_at: float | None = None) -> Verification:
    """The reset GPUs free, what was stopped running again, and the gate's level 1."""
    gpu, free = ctx.params["gpu"], ctx.options.gpu_free_mib
    wanted = None if gpu == ALL_GPUS else int(gpu)

    def look() -> Look:
        gpus = read_gpu_memory(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
        mine = [g for g in gpus if wanted is None or g.index == wanted]
        ev = {"gpu": gpu, "used_mib": max((g.memory_used_mib for g in mine), default=None),
              "gpus": [{"index": g.index, "used_mib": g.memory_used_mib} for g in gpus]}
        return Look(bool(mine) and all(g.memory_used_mib < free for g in mine), None, ev)

    seen, elapsed = poll(ctx, look, patient)
    used = seen.evidence.get("used_mib")
    shown = f"{used:.0f}" if used is not None else "?"
    detail = (strings.REM_GPU_RESET_ALL.format(used=shown) if wanted is None
              else strings.REM_GPU_RESET.format(gpu=gpu, used=shown))
    back, note = holders_back(ctx, captured)
    gate = run_gate(ctx.runner, ctx.target, options=PlaybookOptions(
        expected_gpus=ctx.options.expected_gpus, samples=1, sample_interval_s=0.0,
        command_timeout_s=ctx.options.probe_timeout_s), policy=LEVEL_1,
        since=started_at if started_at is not None else captured.captured_at,
        only=None if wanted is None else (wanted,))
    level = gate.levels[0] if gate.levels else None
    gate_words = strings.REM_GPU_RESET_GATE.format(
        words=level.words if level else "not run",
        why="; ".join(gate.reasons[:4]) if not gate.passed else "")
    ev = {**seen.evidence, "holders_restored": back, "gate": gate.to_json()}
    ok = seen.done and all(s == "active" for s in back.values()) and gate.passed
    text = "; ".join(p for p in (detail, note, gate_words.rstrip(": ")) if p)
    return Verification(ok, text, elapsed, evidence=ev)


def holders_back(ctx: ActionRun, captured: CapturedState) -> tuple[dict[str, str], str]:
    """What was stopped for the reset and its state now (each must run again: a reset that
    leaves persistenced or dcgm-exporter off is not done)."""
    t = ctx.options.probe_timeout_s
    back: dict[str, str] = {}
    for kind, name in released(ctx.params):
        before = captured.owner(owner_key(kind, name))
        if before is None or not before.running:
            continue
        now = read_unit(ctx.runner, ctx.target, name, t) if kind == "unit" else \
            read_container_state(ctx.runner, ctx.target, name, t)
        back[owner_key(kind, name)] = now.active_state or "?"
    if not back:
        return {}, ""
    after = ", ".join(f"{n} {s}" for n, s in back.items())
    return back, strings.REM_GPU_RESET_HOLDERS.format(units=", ".join(back), after=after)


def started(captured: CapturedState) -> float:
    """When the reset's run began (capture time): Xids after it are new."""
    return captured.captured_at or time.time()

