"""A process that holds the GPUs, ended by signal: terminate (SIGTERM, then SIGKILL after
the grace), SIGTERM alone, SIGKILL alone. The ladder's first rungs.

A signal does not fight systemd: a process under a ``Restart=`` unit comes back, so the
kill is refused and the unit's stop proposed instead (``override=yes`` acts anyway, and
is audited); a process of a cron job, or in a container with a restart policy, is refused
with the reason. Verified when the process is gone and the GPUs it held are free, past
its unit's restart window. When that fails the next rung is offered: SIGKILL after a
SIGTERM that did not end it, the unit's stop after a respawn, a GPU reset for memory left
held with no process on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Verification
from bot.domain.headline import Fixes
from bot.domain.host_state import CapturedState, UnitState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp, Refusal, choice, some
from bot.remediation.actions.gpu_reset import GpuReset
from bot.remediation.actions.systemd import StopDisable
from bot.remediation.ladder import owner_unit, used_mib, wedged_gpus
from bot.remediation.spec import RemoteStep
from bot.remediation.steps import generic_skip, wait_gone
from bot.remediation.verify import verify_process

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

CRON_UNITS = ("cron.service", "crond.service")  # a job's process: its crontab line restarts it
_EXITED = re.compile(r"exited ([\d.]+) s after SIGTERM")  # steps.wait_gone's skip reason


class PidParams(ActionParams):
    pid: Annotated[str, BeforeValidator(validate.pid), ParamHelp("a process id")]
    override: Annotated[
        str, BeforeValidator(choice("override", ("no", "yes"))),
        ParamHelp("yes: act although systemd restarts the process (audited)")] = "no"


def _term(p: Mapping[str, str]) -> RemoteStep:
    return RemoteStep("term", ("kill", "-TERM", p["pid"]), 5.0, binary=True)


def _kill(p: Mapping[str, str]) -> RemoteStep:
    return RemoteStep("kill", ("kill", "-KILL", p["pid"]), 5.0, binary=True)


class ProcessAction(Action):
    """What the signal kinds share: preflight against systemd, cron and containers, the
    process's verification, the ladder."""

    Params: ClassVar[type[ActionParams]] = PidParams
    frees_gpus = True
    sends_term: ClassVar[bool] = False  # a SIGTERM that may not end it: SIGKILL is next

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return f"PID {p['pid']}"

    def restarting_owner(self, ctx: ActionRun, captured: CapturedState) -> UnitState | None:
        """The unit that would start this PID again."""
        if not captured.processes:
            return None
        owner = captured.owner(captured.processes[0].unit)
        return owner if owner is not None and owner.restarts else None

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        refusal = super().preflight(ctx, captured)
        if refusal is not None or not captured.processes or ctx.params.get("override") == "yes":
            return refusal
        proc = captured.processes[0]
        if proc.alive and proc.unit and captured.owner(proc.unit) is None:
            return Refusal(strings.REM_OWNER_UNREADABLE.format(pid=proc.pid))
        cron = captured.owner(proc.unit) if proc.unit in CRON_UNITS else None
        if cron is not None and cron.main_pid != proc.pid:
            return Refusal(strings.REM_TERM_CRON.format(pid=proc.pid, unit=cron.name))
        owner = self.restarting_owner(ctx, captured)
        if owner is None:
            return None
        pid = proc.pid
        if owner.fragment_path.startswith("docker:"):
            cid = owner.fragment_path.removeprefix("docker:")
            return Refusal(strings.REM_TERM_CONTAINER.format(pid=pid, cid=cid[:12],
                                                             policy=owner.restart))
        why = strings.REM_TERM_RESPAWNS.format(pid=pid, unit=owner.name, restart=owner.restart,
                                               secs=owner.restart_s)
        return Refusal(why, some(StopDisable.instead(owner.name, pid)))

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        return verify_process(ctx, captured, patient)

    def next_rung(self, result: ActionResult) -> dict[str, Any] | None:
        """The unit's stop after a respawn, SIGKILL after a SIGTERM it outlived, a GPU
        reset for memory left held with no process on it."""
        ev = result.verification.evidence if result.verification is not None else {}
        pid = result.params["pid"]
        owner = owner_unit(result)
        alive = bool((ev.get("process") or {}).get("alive"))
        if result.outcome is Outcome.RESPAWNED and owner:
            return StopDisable.instead(owner, pid)
        if self.sends_term and alive:
            params = {"pid": pid, "override": result.params.get("override", "no")}
            return Sigkill.proposal(params, strings.REM_LADDER_KILL.format(pid=pid))
        wedged = wedged_gpus(ev)
        if wedged and not alive:
            gpu = wedged[0]
            return GpuReset.proposal({"gpu": str(gpu)}, strings.REM_LADDER_RESET.format(
                gpu=gpu, used=f"{used_mib(ev, gpu):.0f}"))
        return None


class Terminate(ProcessAction):
    kind = "process.terminate"
    title = strings.ACT_TITLE_TERMINATE
    risk = strings.ACT_RISK_TERMINATE
    sends_term = True
    fixes = Fixes.PID_HOLDING
    words_from_summary = True  # SIGTERM alone, or SIGKILL after the grace: its summary says
    phrase_template = strings.MSG_ACTION_TERMINATE
    done_template = strings.MSG_DONE_TERMINATE

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (_term(p), _kill(p))

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        """Its SIGKILL waits out the grace after SIGTERM (skipped if the process exits)."""
        if step.name == "kill":
            return wait_gone(ctx, captured.processes[0].pid)
        return generic_skip(ctx, step, captured)

    def counts_for_noop(self, step: RemoteStep) -> bool:
        return step.name != "kill"

    def rungs(self, subject: str, records: Sequence[CommandRecord],
              grace_s: float | None) -> tuple[str, str]:
        """SIGTERM, then SIGKILL after the grace when the kill ran, or how soon SIGTERM
        alone was enough."""
        kill = next((r for r in records if r.name == "kill"), None)
        if kill is not None and kill.ran and grace_s is not None:
            return strings.REM_TERM_THEN_KILL.format(subject=subject, grace=grace_s), ""
        exited = _EXITED.match(kill.skipped or "") if kill is not None else None
        if exited is not None:
            return strings.REM_TERM_EXITED.format(subject=subject, secs=exited[1]), ""
        return self.title, subject


class Sigterm(ProcessAction):
    kind = "process.sigterm"
    title = strings.ACT_TITLE_SIGTERM
    risk = strings.ACT_RISK_SIGTERM
    sends_term = True
    phrase_template = strings.MSG_ACTION_SIGTERM
    done_template = strings.MSG_DONE_SIGTERM

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (_term(p),)

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        """SIGTERM alone: the process gets its unit's TimeoutStopSec to exit."""
        return verify_process(ctx, captured, patient, term_only=True)


class Sigkill(ProcessAction):
    kind = "process.sigkill"
    title = strings.ACT_TITLE_SIGKILL
    risk = strings.ACT_RISK_SIGKILL
    phrase_template = strings.MSG_ACTION_SIGKILL
    done_template = strings.MSG_DONE_SIGKILL

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (_kill(p),)
