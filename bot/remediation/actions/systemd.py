"""A systemd unit that holds the GPUs: stop and disable it, mask it, force-mask it, or put
it back as it was captured (the Revert of the first two).

Each is verified on the unit's own state (``systemctl show``) and on the GPUs it held,
past the unit's restart window (``bot.remediation.verify.verify_unit``). A unit whose own
file lives in /etc cannot be masked without losing that file: the mask is refused and the
stop, the drop-in and the force-mask are proposed instead. After a verified stop of a unit
systemd restarts by itself, the lasting fix (the drop-in) is offered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import ActionResult, Verification
from bot.domain.findings import ProposedAction
from bot.domain.headline import Fixes
from bot.domain.host_state import CapturedState, UnitState
from bot.remediation.actions.base import (
    Action,
    ActionParams,
    ParamHelp,
    Refusal,
    as_proposed,
    choice,
    some,
)
from bot.remediation.actions.dropin import Dropin
from bot.remediation.spec import RemoteStep
from bot.remediation.verify import verify_unit, with_gpu_report

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

Unit = Annotated[str, BeforeValidator(validate.unit_name),
                 ParamHelp("a systemd unit name, e.g. vllm.service")]


class UnitParams(ActionParams):
    unit: Unit


class RevertParams(ActionParams):
    unit: Unit
    unit_file_state: Annotated[
        str, BeforeValidator(choice("unit_file_state", ("enabled", "disabled", "masked"))),
        ParamHelp("enabled, disabled or masked")]
    active_state: Annotated[str, BeforeValidator(choice("active_state", ("active", "inactive"))),
                            ParamHelp("active or inactive")]


def systemctl(verb: str, unit: str, timeout_s: float) -> RemoteStep:
    return RemoteStep(verb, ("systemctl", verb, unit), timeout_s)


class UnitAction(Action):
    """What the systemd kinds share: the unit's own verification and captured state."""

    Params: ClassVar[type[ActionParams]] = UnitParams

    def goal(self, p: Mapping[str, str]) -> Callable[[UnitState], bool]:
        """The unit state this action aims for."""
        return lambda u: not u.running

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        return verify_unit(ctx, captured, self.goal(ctx.params), patient)

    def revert_params(self, captured: CapturedState | None) -> dict[str, str] | None:
        """``systemd.revert``'s parameters: the unit back to its captured file and active
        state (only for the kinds that are revertable)."""
        if not self.revertable or captured is None or not captured.units:
            return None
        unit = captured.units[0]
        file_state = "enabled" if unit.enabled else "masked" if unit.masked else "disabled"
        return {"unit": unit.name, "unit_file_state": file_state,
                "active_state": "active" if unit.running else "inactive"}


class SystemdRevert(UnitAction):
    """Back to the captured state: the file state first, then the active state."""

    kind = "systemd.revert"
    title = strings.ACT_TITLE_REVERT
    risk = strings.ACT_RISK_REVERT
    Params = RevertParams
    captures_gpus = True  # after it: is the memory taken again (evidence)
    reprobe_first = False  # offered after the fact: there is nothing to re-diagnose
    undoes = True
    phrase_template = strings.MSG_ACTION_REVERT
    done_template = strings.MSG_DONE_REVERT

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        """A masked unit cannot be started, so a unit captured masked-and-active is started
        before it is masked again."""
        unit, file_state, active = p["unit"], p["unit_file_state"], p["active_state"]
        steps = [systemctl("unmask", unit, 10.0)] if file_state != "masked" else []
        if file_state in ("enabled", "disabled"):
            steps.append(systemctl(file_state[:-1], unit, 10.0))  # enable | disable
        steps.append(systemctl("start" if active == "active" else "stop", unit, 30.0))
        if file_state == "masked":
            steps.append(systemctl("mask", unit, 10.0))
        return tuple(steps)

    def goal(self, p: Mapping[str, str]) -> Callable[[UnitState], bool]:
        want_file, want_active = p["unit_file_state"], p["active_state"] == "active"
        return lambda u: u.unit_file_state.startswith(want_file) and u.running == want_active

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        return with_gpu_report(ctx, super().verify(ctx, captured, patient))

    def risk_as_revert(self, risk: str) -> str:
        return strings.FLOW_REVERT_RISK


class StopDisable(UnitAction):
    kind = "systemd.stop_disable"
    title = strings.ACT_TITLE_STOP_DISABLE
    risk = strings.ACT_RISK_STOP_DISABLE
    frees_gpus = True
    revertable = True
    revert_kind = SystemdRevert.kind
    fixes = Fixes.UNIT_HOLDING
    phrase_template = strings.MSG_ACTION_STOP_DISABLE
    done_template = strings.MSG_DONE_STOP_DISABLE

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (systemctl("stop", p["unit"], 15.0), systemctl("disable", p["unit"], 10.0))

    def goal(self, p: Mapping[str, str]) -> Callable[[UnitState], bool]:
        return lambda u: not u.running and not u.enabled

    def lasting(self, result: ActionResult) -> list[ProposedAction]:
        """After a verified stop/disable of a unit systemd restarts by itself: the drop-in
        (Restart=on-failure, a start guard) so its next crash or re-enable does not take
        the GPUs again. Its own approval; nothing is proposed for a unit with Restart=no."""
        if not result.ok or result.captured is None:
            return []
        unit = result.captured.unit(result.params.get("unit", ""))
        if unit is None or not unit.restarts:
            return []
        p = Dropin.proposal({"unit": unit.name},
                            strings.REM_LASTING_DROPIN.format(unit=unit.name, restart=unit.restart))
        return [] if p is None else [as_proposed(result.host, p)]

    @classmethod
    def instead(cls, unit: str, pid: int | str) -> dict[str, Any] | None:
        """Stop the unit instead (what a refused kill or mask proposes)."""
        return cls.proposal({"unit": unit}, strings.REM_PROPOSE_STOP.format(pid=pid, unit=unit))


def _mask_goal(u: UnitState) -> bool:
    return not u.running and u.masked


class Mask(UnitAction):
    kind = "systemd.mask"
    title = strings.ACT_TITLE_MASK
    risk = strings.ACT_RISK_MASK
    frees_gpus = True
    revertable = True
    revert_kind = SystemdRevert.kind
    fixes = Fixes.UNIT_HOLDING
    phrase_template = strings.MSG_ACTION_MASK
    done_template = strings.MSG_DONE_MASK

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (systemctl("stop", p["unit"], 15.0), systemctl("mask", p["unit"], 10.0))

    def goal(self, p: Mapping[str, str]) -> Callable[[UnitState], bool]:
        return _mask_goal

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """A unit whose own file is in /etc cannot be masked without losing the file."""
        refusal = super().preflight(ctx, captured)
        unit = captured.units[0] if captured.units else None
        if refusal is not None or unit is None or not unit.file_in_etc or unit.masked:
            return refusal
        p = {"unit": unit.name}
        return Refusal(strings.REM_MASK_ETC.format(unit=unit.name, path=unit.fragment_path), some(
            StopDisable.instead(unit.name, unit.main_pid or "-"),
            Dropin.proposal(p, strings.REM_PROPOSE_DROPIN.format(unit=unit.name)),
            MaskForce.proposal(p, strings.REM_PROPOSE_MASK_FORCE.format(unit=unit.name))))


class MaskForce(UnitAction):
    kind = "systemd.mask_force"
    title = strings.ACT_TITLE_MASK_FORCE
    risk = strings.ACT_RISK_MASK_FORCE
    frees_gpus = True
    phrase_template = strings.MSG_ACTION_MASK_FORCE
    done_template = strings.MSG_DONE_MASK_FORCE

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("stop", ("systemctl", "stop", p["unit"]), 15.0),
                RemoteStep("mask", ("systemctl", "mask", "--force", p["unit"]), 10.0))

    def goal(self, p: Mapping[str, str]) -> Callable[[UnitState], bool]:
        return _mask_goal
