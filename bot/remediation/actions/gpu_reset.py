"""One GPU reset (``nvidia-smi --gpu-reset -i N``): the rung after the processes are gone
and the memory is still held; a reboot is the rung after it.

What keeps a GPU open without being a compute process: NVIDIA's reset documentation
(nvidia-smi(1), "-r, --gpu-reset": "there can't be any applications using this
particular device (e.g. CUDA application, graphics application like X server,
monitoring application like other instance of nvidia-smi)"; the Fabric Manager user
guide has nvidia-fabricmanager stopped before a reset and started after) has these
daemons stopped first and started again afterwards. Only those active at capture are
stopped, and they are started again even when the reset fails. Refused while any process
uses the GPU, and on an NVSwitch host (a reboot is proposed there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import ActionResult, Seen, Verification
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp, Refusal, some
from bot.remediation.actions.reboot import HostReboot
from bot.remediation.polling import Look, poll
from bot.remediation.readings import fabric_states, read_gpu_memory, read_unit
from bot.remediation.spec import RemoteStep
from bot.remediation.steps import generic_skip

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

GPU_HOLDER_UNITS = ("nvidia-persistenced.service", "dcgm-exporter.service",
                    "nvidia-fabricmanager.service")
RELEASE, RESTORE = "release", "restore"  # the step names around a reset


def gpu_index(value: object) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not text.isdigit() or not 0 <= int(text) < 64:
        raise validate.InvalidIdentifier("gpu", value, "a GPU index, 0..63")
    return str(int(text))


class GpuParams(ActionParams):
    gpu: Annotated[str, BeforeValidator(gpu_index), ParamHelp("a GPU index")]


class GpuReset(Action):
    kind = "gpu.reset"
    title = strings.ACT_TITLE_GPU_RESET
    risk = strings.ACT_RISK_GPU_RESET
    Params = GpuParams
    frees_gpus = True
    repair = True
    phrase_template = strings.MSG_ACTION_GPU_RESET
    done_template = strings.MSG_DONE_GPU_RESET

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        release = tuple(RemoteStep(RELEASE, ("systemctl", "stop", u), 30.0)
                        for u in GPU_HOLDER_UNITS)
        restore = tuple(RemoteStep(RESTORE, ("systemctl", "start", u), 30.0, always=True)
                        for u in reversed(GPU_HOLDER_UNITS))
        return (*release,
                RemoteStep("reset", ("nvidia-smi", "--gpu-reset", "-i", p["gpu"]), 60.0),
                *restore)

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return f"GPU {p['gpu']}"

    def holder_units(self) -> tuple[str, ...]:
        """The daemons that hold the device, stopped around the reset."""
        return GPU_HOLDER_UNITS

    def read_back_gpus(self) -> bool:
        """A read-back checks its own GPU (its verification), not every GPU."""
        return False

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        """Stop a holder daemon only if it ran at capture, and start again only what was
        stopped (a daemon that was off stays off)."""
        if step.name not in (RELEASE, RESTORE):
            return generic_skip(ctx, step, captured)
        unit = captured.owner(step.argv[-1])
        if unit is None or not unit.running:
            state = unit.active_state if unit is not None and unit.exists else "not installed"
            return f"{step.argv[-1]} was {state or 'inactive'} before the reset"
        return None

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """No process on the GPU, and no NVSwitch fabric (see ``_nvswitch``)."""
        index = int(ctx.params["gpu"])
        gpu = next((g for g in captured.gpus if g.index == index), None)
        if gpu is None:
            return Refusal(strings.REM_GPU_UNKNOWN.format(gpu=index, host=ctx.target.name))
        pids = sorted({h.pid for h in captured.holders if h.gpu_uuid == gpu.uuid})
        if pids:
            return Refusal(strings.REM_GPU_IN_USE.format(gpu=index,
                                                         pids=", ".join(map(str, pids))))
        return _nvswitch(ctx, index)

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        """The GPU under ``gpu_free_mib``, and every holder daemon stopped for it active
        again (a reset that leaves nvidia-persistenced off is not done)."""
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
        back, note = _holders_back(ctx, captured)
        ev = {**seen.evidence, "holders_restored": back}
        return Verification(Seen.of(seen.done and all(s == "active" for s in back.values())),
                            f"{detail}; {note}" if note else detail, elapsed, evidence=ev)

    def next_rung(self, result: ActionResult) -> dict[str, Any] | None:
        return HostReboot.proposal({}, strings.REM_LADDER_REBOOT.format(
            gpu=result.params["gpu"], host=result.host))


def _nvswitch(ctx: ActionRun, index: int) -> Refusal | None:
    """No single-GPU reset on an NVSwitch host. NVIDIA's Fabric Manager user guide
    (docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide, "GPU reset" under bare
    metal mode) has the GPUs and NVSwitches of a baseboard reset together, with
    nvidia-fabricmanager stopped before and started after; NVIDIA's own tooling does it
    that way (NVIDIA/gpu-driver-container#909 runs ``nvidia-smi -r`` for all GPUs after
    starting FM; NVIDIA/ai-cloud-validation#603: stop Fabric Manager, then
    ``nvidia-smi -r``), and a fabric left half-reset needs another reset or a reboot
    (NVIDIA/nccl#1488). There is no whole-baseboard reset action yet: a reboot does it."""
    states = fabric_states(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
    if not states:
        return None
    host = ctx.target.name
    return Refusal(strings.REM_GPU_NVSWITCH.format(host=host, gpu=index, state=states[0]),
                   some(HostReboot.proposal({}, strings.REM_PROPOSE_REBOOT_NVSWITCH.format(
                       host=host))))


def _holders_back(ctx: ActionRun, captured: CapturedState) -> tuple[dict[str, str], str]:
    """The holder daemons stopped for the reset, and their state now."""
    stopped = [u.name for u in captured.owners if u.name in GPU_HOLDER_UNITS and u.running]
    if not stopped:
        return {}, ""
    t = ctx.options.probe_timeout_s
    back = {name: read_unit(ctx.runner, ctx.target, name, t).active_state or "?"
            for name in stopped}
    after = ", ".join(f"{n} {s}" for n, s in back.items())
    return back, strings.REM_GPU_RESET_HOLDERS.format(units=", ".join(stopped), after=after)
