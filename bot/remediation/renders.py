"""Renderings of the issue-17 kinds: force-mask, the ladder's rungs, the drop-in, cleanup.

Each turns validated parameters into ``RemoteStep``s; nothing here runs anything.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.domain import validate
from bot.remediation.spec import RemoteStep


def _mask_force(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("stop", ("systemctl", "stop", p["unit"]), 15.0),
            RemoteStep("mask", ("systemctl", "mask", "--force", p["unit"]), 10.0))


def _sigterm(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("term", ("kill", "-TERM", p["pid"]), 5.0, binary=True),)


def _sigkill(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("kill", ("kill", "-KILL", p["pid"]), 5.0, binary=True),)


def _gpu_reset(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("reset", ("nvidia-smi", "--gpu-reset", "-i", p["gpu"]), 60.0),)


def _reboot(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("reboot", ("systemctl", "reboot"), 10.0),)


DROPIN_NAME = "50-incident-bot.conf"
RESERVATION_MARKER = "/run/incident-bot/gpu-reservation"


def dropin_path(unit: str) -> str:
    return f"/etc/systemd/system/{unit}.d/{DROPIN_NAME}"


def dropin_lines(p: Mapping[str, str]) -> tuple[str, ...]:
    """The lasting fix: no restart after a clean stop, no start while a job holds the GPUs."""
    return ("# incident-bot: stops this unit from taking GPUs back after a crash",
            "# undo: incident-bot act HOST systemd.dropin_revert unit=" + p["unit"],
            "[Service]", "Restart=on-failure", f"TimeoutStopSec={p['timeout_stop_s']}",
            f"ExecStartPre=/usr/bin/test ! -e {p['marker']}")


def _dropin(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    path = dropin_path(p["unit"])
    return (RemoteStep("mkdir", ("mkdir", "-p", path.rsplit("/", 1)[0]), 10.0),
            RemoteStep("write", ("tee", path), 10.0, stdin_lines=dropin_lines(p)),
            RemoteStep("reload", ("systemctl", "daemon-reload"), 30.0))


def _dropin_revert(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("remove", ("rm", "-f", dropin_path(p["unit"])), 10.0),
            RemoteStep("reload", ("systemctl", "daemon-reload"), 30.0))


def _seconds(value: object) -> str:
    if not isinstance(value, str) or not value.isdigit() or not 1 <= int(value) <= 3600:
        raise validate.InvalidIdentifier("timeout_stop_s", value, "whole seconds, 1..3600")
    return str(int(value))


def _gpu_index(value: object) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not text.isdigit() or not 0 <= int(text) < 64:
        raise validate.InvalidIdentifier("gpu", value, "a GPU index, 0..63")
    return str(int(text))


def _marker(value: object) -> str:
    return validate.path_under(value, ("/run/incident-bot",))


PATH_SEP = "|"  # not in the path grammar: joins the files of one disk.cleanup
MAX_PATHS = 500


def _paths(value: object) -> str:
    """``|``-joined absolute paths under the default prefixes (the host's own prefixes
    are checked again in the preflight)."""
    if not isinstance(value, str) or not value:
        raise validate.InvalidIdentifier("paths", value, "one or more paths joined by |")
    parts = value.split(PATH_SEP)
    if len(parts) > MAX_PATHS:
        raise validate.InvalidIdentifier("paths", value, f"at most {MAX_PATHS} paths")
    return PATH_SEP.join(validate.path_under(p) for p in parts)


def _bytes(value: object) -> str:
    if not isinstance(value, str) or not value.isdigit() or len(value) > 20:
        raise validate.InvalidIdentifier("need_bytes", value, "a whole number of bytes")
    return str(int(value))


def _cleanup(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return tuple(RemoteStep("rm", ("rm", "-f", "--", path), 30.0)
                 for path in p["paths"].split(PATH_SEP))


SLURM_BOT = "incident-bot"  # every drain reason the bot writes starts with it


def drain_reason(p: Mapping[str, str]) -> str:
    """``incident-bot INC-7: GPU 2 fell off the bus (Xid 79)``: who drained it and why."""
    incident = p.get("incident", "")
    return f"{SLURM_BOT} {incident}: {p['reason']}" if incident else f"{SLURM_BOT}: {p['reason']}"


def _slurm_drain(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("drain", ("scontrol", "update", f"NodeName={p['node']}", "State=DRAIN",
                                 f"Reason={drain_reason(p)}"), 15.0),)


def _slurm_cancel(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("scancel", ("scancel", p["job"]), 15.0),)


def _slurm_requeue(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("requeue", ("scontrol", "requeue", p["job"]), 15.0),)


def _slurm_resume(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("resume", ("scontrol", "update", f"NodeName={p['node']}",
                                  "State=RESUME"), 15.0),)
