"""A GPU reset (``nvidia-smi --gpu-reset``) that clears every client of the device files
first: the rung after the processes are gone and the memory is still held (a reboot is
the rung after it), and what the diagnosis proposes for a wedged GPU.

What keeps a GPU open without being a compute process: NVIDIA's reset documentation
(nvidia-smi(1), "-r, --gpu-reset": "there can't be any applications using this
particular device (e.g. CUDA application, graphics application like X server,
monitoring application like other instance of nvidia-smi)"; NVSentinel#1690: persistence
mode) has them stopped first; the Fabric Manager user guide has nvidia-fabricmanager
stopped before a reset of the whole baseboard and started after.

- Parameters: ``gpu`` (an index, or ``all``: every GPU at once, an NVSwitch baseboard
  before Hopper) and ``release``: what holds ``/dev/nvidia*`` (``container:NAME`` /
  ``unit:NAME.service``, ``|``-joined, from the diagnosis's device clients:
  ``playbooks/device_clients.py``); empty, the NVIDIA daemons by unit name (a reset typed
  by hand or proposed by the ladder).
- Capture: the state of everything the release list names (units through ``systemctl
  show``, containers through ``docker inspect``): only what ran is stopped, and only what
  was stopped is started again, also when the reset fails (``always`` steps).
- Preflight: no compute process on the GPU (or on any, for ``all``); no GPU of an NVSwitch
  baseboard before Hopper reset alone (the refusal proposes every GPU, Fabric Manager
  stopped around it); and every client of ``/dev/nvidia*`` read now is in the release
  list, or the refusal names it and proposes the reset that stops it too (a dcgm-exporter
  container started since the diagnosis, a ladder's reset that only knew the units).
- Verify: each reset GPU under ``gpu_free_mib``, every stopped daemon running again, and
  the health gate's readings level (``playbooks/health_gate.py``, level 1) passing with no
  new Xid since the reset began.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import ActionResult, Seen, Verification
from bot.domain.headline import EVERY_GPU, Fixes
from bot.domain.host_state import CapturedState, UnitState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp, Refusal, some
from bot.remediation.actions.reboot import HostReboot
from bot.remediation.polling import Look, poll
from bot.remediation.probe_runner import ProbeFailed, run_probe, run_probes
from bot.remediation.readings import read_gpu_memory, read_unit
from bot.remediation.spec import RemoteStep
from bot.remediation.steps import generic_skip
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks import probes
from playbooks.base import PlaybookOptions, Probe, cmd
from playbooks.commands import FABRIC_MANAGER_COMMAND
from playbooks.device_clients import (
    CONTAINER_RE,
    RELEASE_SEP,
    DeviceClient,
    ReleasePlan,
    clients,
    docker_names,
    parse_release,
    pre_hopper_nvswitch,
    release_plan,
)
from playbooks.health_gate import GateLevel, GatePolicy, run_gate
from playbooks.parsers import ps

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

GPU_HOLDER_UNITS = ("nvidia-persistenced.service", "dcgm-exporter.service",
                    "nvidia-fabricmanager.service")
RELEASE, RESTORE = "release", "restore"  # the step names around a reset
ALL_GPUS = EVERY_GPU  # the ``gpu`` parameter for every GPU at once (nvidia-smi --gpu-reset)
MAX_RELEASED = 16
LEVEL_1 = GatePolicy(levels=(GateLevel.READINGS,))
Proposal = dict[str, Any]


def gpu_index(value: object) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not text.isdigit() or not 0 <= int(text) < 64:
        raise validate.InvalidIdentifier("gpu", value, "a GPU index, 0..63")
    return str(int(text))


def gpu_target(value: object) -> str:
    """A GPU index, or ``all``: every GPU at once (an NVSwitch baseboard before Hopper)."""
    return ALL_GPUS if value == ALL_GPUS else gpu_index(value)


def release_list(value: object) -> str:
    """``container:NAME|unit:NAME.service…`` (empty: the NVIDIA daemons by unit name)."""
    if value == "":
        return ""
    if not isinstance(value, str) or len(value) > 2000:
        raise validate.InvalidIdentifier("release", value, "unit:NAME or container:NAME, |-joined")
    out: list[str] = []
    for kind, name in parse_release(value):
        ok = (kind == "container" and CONTAINER_RE.match(name) is not None) or (
            kind == "unit" and name.endswith(".service")
            and validate.is_valid(validate.unit_name, name))
        if not ok or f"{kind}:{name}" in out:
            raise validate.InvalidIdentifier("release", value,
                                             "unit:NAME.service or container:NAME, each once")
        out.append(f"{kind}:{name}")
    if len(out) > MAX_RELEASED:
        raise validate.InvalidIdentifier("release", value, f"at most {MAX_RELEASED} daemons")
    return RELEASE_SEP.join(out)


class GpuParams(ActionParams):
    gpu: Annotated[str, BeforeValidator(gpu_target), ParamHelp("a GPU index, or all")]
    release: Annotated[str, BeforeValidator(release_list), ParamHelp(
        "what holds /dev/nvidia*: unit:NAME or container:NAME, |-joined (default: the "
        "NVIDIA daemons' units)")] = ""


def released(p: Mapping[str, str]) -> list[tuple[str, str]]:
    """What the reset stops and starts again, in stop order: its ``release`` list, else the
    NVIDIA daemons by unit name."""
    given = parse_release(p.get("release", ""))
    return given or [("unit", u) for u in GPU_HOLDER_UNITS]


def owner_key(kind: str, name: str) -> str:
    """How a release subject's captured state is named among the owners."""
    return name if kind == "unit" else f"container:{name}"


def holder_subject(step: RemoteStep) -> tuple[str, str]:
    """(``unit`` | ``container``, name) that a stop/start step around the reset acts on."""
    return ("container" if step.argv[0] == "docker" else "unit"), step.argv[-1]


def gpu_words(gpu: str) -> str:
    """``GPU 3``, or ``every GPU``."""
    return strings.MSG_EVERY_GPU if gpu == ALL_GPUS else f"GPU {gpu}"


def _holder_step(kind: str, name: str, verb: str, always: bool = False) -> RemoteStep:
    argv = ("docker", verb, name) if kind == "container" else ("systemctl", verb, name)
    return RemoteStep(RELEASE if verb == "stop" else RESTORE, argv, 30.0, always=always)


class GpuReset(Action):
    kind = "gpu.reset"
    title = strings.ACT_TITLE_GPU_RESET
    risk = strings.ACT_RISK_GPU_RESET
    Params = GpuParams
    frees_gpus = True
    repair = True
    fixes = Fixes.GPU_WEDGED
    phrase_template = strings.MSG_ACTION_GPU_RESET
    done_template = strings.MSG_DONE_GPU_RESET

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        """Stop what holds the device, reset, start it again (``always``: also when the
        reset failed), in reverse order."""
        subjects = released(p)
        release = tuple(_holder_step(k, n, "stop") for k, n in subjects)
        restore = tuple(_holder_step(k, n, "start", always=True) for k, n in reversed(subjects))
        which = () if p["gpu"] == ALL_GPUS else ("-i", p["gpu"])
        return (*release, RemoteStep("reset", ("nvidia-smi", "--gpu-reset", *which), 60.0),
                *restore)

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return gpu_words(p["gpu"])

    def phrase(self, p: Mapping[str, str]) -> str:
        return strings.MSG_ACTION_GPU_RESET.format(**p, gpu_label=gpu_words(p["gpu"]))

    def done(self, p: Mapping[str, str]) -> str:
        return strings.MSG_DONE_GPU_RESET.format(**p, gpu_label=gpu_words(p["gpu"]))

    def clears_xids(self, p: Mapping[str, str]) -> str:
        return strings.XID_CLEARED_BY_RESET.format(gpu=gpu_words(p["gpu"]))

    def capture_holders(self, runner: SSHRunner, target: SSHTarget, p: Mapping[str, str],
                        timeout_s: float) -> tuple[UnitState, ...]:
        """The state of everything the reset stops and starts again, before it runs."""
        return tuple(read_unit(runner, target, name, timeout_s) if kind == "unit"
                     else read_container_state(runner, target, name, timeout_s)
                     for kind, name in released(p))

    def read_back_gpus(self) -> bool:
        """A read-back checks its own GPU (its verification), not every GPU."""
        return False

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        """Stop a holder (unit or container) only if it ran at capture, and start again
        only what was stopped (a daemon that was off stays off)."""
        if step.name not in (RELEASE, RESTORE):
            return generic_skip(ctx, step, captured)
        unit = captured.owner(owner_key(*holder_subject(step)))
        if unit is None or not unit.running:
            state = unit.active_state if unit is not None and unit.exists else "not installed"
            return f"{step.argv[-1]} was {state or 'inactive'} before the reset"
        return None

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """The GPU exists and no process uses it; then ``clients_check``: an NVSwitch
        baseboard before Hopper resets only as a whole (NVIDIA's Fabric Manager user guide,
        "GPU reset": GPUs and NVSwitches together, Fabric Manager stopped around it;
        NVIDIA's own tooling does it that way, NVIDIA/gpu-driver-container#909,
        ai-cloud-validation#603; a fabric left half-reset needs another reset or a reboot,
        NVIDIA/nccl#1488), and every client of /dev/nvidia* must be one the reset stops
        and starts again."""
        if ctx.params["gpu"] != ALL_GPUS:
            index = int(ctx.params["gpu"])
            gpu = next((g for g in captured.gpus if g.index == index), None)
            if gpu is None:
                return Refusal(strings.REM_GPU_UNKNOWN.format(gpu=index, host=ctx.target.name))
            pids = sorted({h.pid for h in captured.holders if h.gpu_uuid == gpu.uuid})
            if pids:
                return Refusal(strings.REM_GPU_IN_USE.format(gpu=index,
                                                             pids=", ".join(map(str, pids))))
        return clients_check(ctx, captured)

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        """The reset GPUs free, what was stopped running again, and the gate's level 1
        since the reset began (capture time: Xids after it are new)."""
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
            since=captured.captured_at or time.time(),
            only=None if wanted is None else (wanted,))
        level = gate.levels[0] if gate.levels else None
        gate_words = strings.REM_GPU_RESET_GATE.format(
            words=level.words if level else "not run",
            why="; ".join(gate.reasons[:4]) if not gate.passed else "")
        ev = {**seen.evidence, "holders_restored": back, "gate": gate.to_json()}
        ok = seen.done and all(s == "active" for s in back.values()) and gate.passed
        text = "; ".join(p for p in (detail, note, gate_words.rstrip(": ")) if p)
        return Verification(Seen.of(ok), text, elapsed, evidence=ev)

    def next_rung(self, result: ActionResult) -> dict[str, Any] | None:
        return HostReboot.proposal({}, strings.REM_LADDER_REBOOT.format(
            gpu=result.params["gpu"], host=result.host))


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


def clients_check(ctx: ActionRun, captured: CapturedState) -> Refusal | None:
    """Why this reset must not run now, and what to approve instead (None: it may run)."""
    gpu, host, t = ctx.params["gpu"], ctx.target.name, ctx.options.probe_timeout_s
    every = gpu == ALL_GPUS
    if every:
        pids = sorted({h.pid for h in captured.holders})
        if pids:
            return Refusal(strings.REM_GPU_ALL_IN_USE.format(pids=", ".join(map(str, pids[:8]))))
    _, fm_state = run_probe(ctx.runner, ctx.target, Probe(
        "fabric_manager", FABRIC_MANAGER_COMMAND, str.strip), t)
    xml_result, xml = run_probe(ctx.runner, ctx.target, probes.gpu_xml(), t)
    together = xml_result.ok and pre_hopper_nvswitch(xml.gpus, fm_state)
    plan = release_plan(read_clients(ctx.runner, ctx.target, t), all_gpus=every or together,
                        compute={h.pid for h in captured.holders})
    if together and not every:
        return Refusal(strings.REM_GPU_NVSWITCH_ALONE.format(host=host, gpu=gpu),
                       _every_gpu(host, plan))
    if plan.blocking:
        return Refusal(strings.GPU_RESET_BLOCKED.format(
            who=", ".join(c.words for c in plan.blocking[:4])))
    given = {f"{k}:{n}" for k, n in released(ctx.params)}
    missing = [c for c in plan.named if c.subject not in given
               and not _by_unit_name(ctx.params, c)]
    if not missing:
        return None
    alt = GpuReset.proposal({"gpu": gpu, "release": plan.param},
                            strings.REM_PROPOSE_RESET_CLEARING.format(
                                gpu=gpu, stops=", ".join(c.words for c in plan.named)))
    return Refusal(strings.REM_GPU_CLIENTS_NOT_RELEASED.format(
        who=", ".join(c.words for c in missing[:6]), gpu=gpu), some(alt))


def _by_unit_name(params: Mapping[str, str], c: DeviceClient) -> bool:
    """A reset without a release list stops the NVIDIA daemons' units by name."""
    return not params.get("release") and c.unit in GPU_HOLDER_UNITS


def _every_gpu(host: str, plan: ReleasePlan) -> tuple[Proposal, ...]:
    stops = ", ".join(c.words for c in plan.named) or strings.GPU_RESET_NOTHING_TO_STOP
    return some(GpuReset.proposal({"gpu": ALL_GPUS, "release": plan.param},
                                   strings.GPU_PROPOSE_RESET_ALL.format(
                                       host=host, why=strings.GPU_RESET_WHY_NVSWITCH,
                                       stops=stops)))


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
