"""The lasting fix for a unit that takes the GPUs back: the incident-bot drop-in
(``Restart=on-failure``, ``TimeoutStopSec``, a start guard on the reservation marker), and
its removal.

The drop-in's text is piped in by an unprivileged ``printf`` so that only the allowlisted
writer (``tee PATH``) runs as root. Verified when systemd lists the file and shows its
values (or, removed, no longer lists it); its verification is about the file, not the
GPUs, so the message's "what is true now" comes from the action before it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import Seen, Verification
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp
from bot.remediation.readings import read_dropins
from bot.remediation.spec import RemoteStep
from playbooks.parsers.systemd import parse_timespan

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

DROPIN_NAME = "50-incident-bot.conf"
RESERVATION_MARKER = "/run/incident-bot/gpu-reservation"
Unit = Annotated[str, BeforeValidator(validate.unit_name),
                 ParamHelp("a systemd unit name, e.g. vllm.service")]


def check_seconds(value: object) -> str:
    if not isinstance(value, str) or not value.isdigit() or not 1 <= int(value) <= 3600:
        raise validate.InvalidIdentifier("timeout_stop_s", value, "whole seconds, 1..3600")
    return str(int(value))


def check_marker(value: object) -> str:
    return validate.path_under(value, ("/run/incident-bot",))


class DropinParams(ActionParams):
    unit: Unit
    timeout_stop_s: Annotated[str, BeforeValidator(check_seconds),
                              ParamHelp("TimeoutStopSec in seconds")] = "30"
    marker: Annotated[str, BeforeValidator(check_marker),
                      ParamHelp("reservation marker path")] = RESERVATION_MARKER


class DropinUnitParams(ActionParams):
    unit: Unit


def dropin_path(unit: str) -> str:
    return f"/etc/systemd/system/{unit}.d/{DROPIN_NAME}"


def dropin_lines(p: Mapping[str, str]) -> tuple[str, ...]:
    """The lasting fix: no restart after a clean stop, no start while a job holds the GPUs."""
    return ("# incident-bot: stops this unit from taking GPUs back after a crash",
            "# undo: incident-bot act HOST " + DropinRevert.kind + " unit=" + p["unit"],
            "[Service]", "Restart=on-failure", f"TimeoutStopSec={p['timeout_stop_s']}",
            f"ExecStartPre=/usr/bin/test ! -e {p['marker']}")


def dropin_diff(params: Mapping[str, object]) -> str:
    """The drop-in as a unified diff against nothing: what the thread shows before approval."""
    clean = Dropin().validate(params)
    path = dropin_path(clean["unit"])
    lines = [f"{line}\n" for line in dropin_lines(clean)]
    return "".join(difflib.unified_diff([], lines, fromfile="/dev/null", tofile=path))


def verify_dropin(ctx: ActionRun, captured: CapturedState, installed: bool) -> Verification:
    """Installed: systemd lists the file and shows its values. Removed: the file is gone."""
    unit = captured.units[0]
    path = dropin_path(unit.name)
    props = read_dropins(ctx.runner, ctx.target, unit.name, ctx.options.probe_timeout_s)
    paths = props.get("DropInPaths", "").split()
    timeout = parse_timespan(props.get("TimeoutStopUSec", ""), -1.0)
    if installed:
        ok = (path in paths and props.get("Restart") == "on-failure"
              and timeout == float(ctx.params["timeout_stop_s"]))
    else:
        ok = path not in paths
    before: dict[str, Any] = {"restart": unit.restart, "timeout_stop_s": unit.timeout_stop_s}
    detail = strings.REM_DROPIN_NOW.format(unit=unit.name, restart=props.get("Restart", "?"),
                                           timeout=props.get("TimeoutStopUSec", "?"),
                                           paths=", ".join(paths) or "none")
    return Verification(Seen.of(ok), detail,
                        evidence={"show": props, "before": before, "path": path})


class DropinRevert(Action):
    kind = "systemd.dropin_revert"
    title = strings.ACT_TITLE_DROPIN_REVERT
    risk = strings.ACT_RISK_DROPIN_REVERT
    Params = DropinUnitParams
    undoes = True
    quiet_now = True
    phrase_template = strings.MSG_ACTION_DROPIN_REVERT
    done_template = strings.MSG_DONE_DROPIN_REVERT

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("remove", ("rm", "-f", dropin_path(p["unit"])), 10.0),
                RemoteStep("reload", ("systemctl", "daemon-reload"), 30.0))

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        return verify_dropin(ctx, captured, installed=False)


class Dropin(Action):
    kind = "systemd.dropin"
    title = strings.ACT_TITLE_DROPIN
    risk = strings.ACT_RISK_DROPIN
    Params = DropinParams
    revertable = True
    revert_kind = DropinRevert.kind
    quiet_now = True
    phrase_template = strings.MSG_ACTION_DROPIN
    done_template = strings.MSG_DONE_DROPIN

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        path = dropin_path(p["unit"])
        return (RemoteStep("mkdir", ("mkdir", "-p", path.rsplit("/", 1)[0]), 10.0),
                RemoteStep("write", ("tee", path), 10.0, stdin_lines=dropin_lines(p)),
                RemoteStep("reload", ("systemctl", "daemon-reload"), 30.0))

    def preview(self, p: Mapping[str, str]) -> str:
        return dropin_diff(p)

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        return verify_dropin(ctx, captured, installed=True)

    def revert_params(self, captured: CapturedState | None) -> dict[str, str] | None:
        """``systemd.dropin_revert`` of the unit the drop-in went on."""
        if captured is None or not captured.units:
            return None
        return {"unit": captured.units[0].name}
