"""The action catalog: every command the bot may run to change a host, and nothing else.

Chat and the CLI name an action kind and typed parameters; they never send a command.
Each parameter is checked against ``bot.domain.validate``'s grammar (or a closed set of
values) before it can reach a command line, and every argument is ``shlex.quote``d
anyway. ``plan`` gives the exact text that will be sent, which is what the approver
sees and what ``deploy/sudoers/incident-bot`` allows.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from bot.core import strings
from bot.domain import validate
from bot.remediation.spec import SUDO as SUDO
from bot.remediation.spec import ActionRefused as ActionRefused
from bot.remediation.spec import ActionSpec as ActionSpec
from bot.remediation.spec import ParamSpec as ParamSpec
from bot.remediation.spec import RemoteStep
from bot.remediation.spec import choice as _choice
from bot.remediation.spec import job_id as job_id
from bot.ssh.base import SSHTarget
from playbooks.device_clients import CONTAINER_RE, RELEASE_SEP, parse_release

# --- the commands each kind renders (nothing here runs anything) ---------------------

def _mask_force(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("stop", ("systemctl", "stop", p["unit"]), 15.0),
            RemoteStep("mask", ("systemctl", "mask", "--force", p["unit"]), 10.0))


def _sigterm(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("term", ("kill", "-TERM", p["pid"]), 5.0, binary=True),)


def _sigkill(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("kill", ("kill", "-KILL", p["pid"]), 5.0, binary=True),)


# What keeps a GPU open without being a compute process: NVIDIA's reset documentation
# (nvidia-smi(1), "-r, --gpu-reset": "there can't be any applications using this
# particular device (e.g. CUDA application, graphics application like X server,
# monitoring application like other instance of nvidia-smi)"; the Fabric Manager user
# guide has nvidia-fabricmanager stopped before a reset and started after) has these
# daemons stopped first and started again afterwards. Only those active at capture are
# stopped, and they are started again even when the reset fails.
GPU_HOLDER_UNITS = ("nvidia-persistenced.service", "dcgm-exporter.service",
                    "nvidia-fabricmanager.service")
RELEASE, RESTORE = "release", "restore"  # the step names around a reset
ALL_GPUS = "all"  # gpu.reset's gpu parameter: every GPU at once (nvidia-smi --gpu-reset)


def released(p: Mapping[str, str]) -> list[tuple[str, str]]:
    """What a ``gpu.reset`` stops and starts again, in stop order: its ``release`` list
    (``container:NAME`` / ``unit:NAME``, from the diagnosis's device clients), else the
    NVIDIA daemons by unit name (a reset typed by hand or proposed by the ladder)."""
    given = parse_release(p.get("release", ""))
    return given or [("unit", u) for u in GPU_HOLDER_UNITS]


def holder_subject(step: RemoteStep) -> str:
    """The release subject a stop/start step of a reset acts on (``unit:x`` or ``container:y``)."""
    return f"{'container' if step.argv[0] == 'docker' else 'unit'}:{step.argv[-1]}"


def _holder_step(kind: str, name: str, verb: str, always: bool = False) -> RemoteStep:
    argv = ("docker", verb, name) if kind == "container" else ("systemctl", verb, name)
    return RemoteStep(RELEASE if verb == "stop" else RESTORE, argv, 30.0, always=always)


def _gpu_reset(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    subjects = released(p)
    release = tuple(_holder_step(k, n, "stop") for k, n in subjects)
    restore = tuple(_holder_step(k, n, "start", always=True) for k, n in reversed(subjects))
    which = () if p["gpu"] == ALL_GPUS else ("-i", p["gpu"])
    return (*release, RemoteStep("reset", ("nvidia-smi", "--gpu-reset", *which), 60.0),
            *restore)


def _reboot(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("reboot", ("systemctl", "reboot"), 10.0),)


RMA_DIR = "/var/log/incident-bot"


def rma_report_path(incident: str) -> str:
    """Where ``nvidia-bug-report.sh --output-file`` writes for ``rma.handoff`` (+ ``.gz``)."""
    return f"{RMA_DIR}/rma-{incident}.log"


def _rma_handoff(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    """``--safe-mode``: the parts that can hang on a failing GPU are skipped (a full report
    froze on one in NVIDIA/open-gpu-kernel-modules#1150)."""
    return (RemoteStep("mkdir", ("mkdir", "-p", RMA_DIR), 10.0),
            RemoteStep("bug_report", ("nvidia-bug-report.sh", "--safe-mode", "--output-file",
                                      rma_report_path(p["incident"])), 900.0))


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


def _gpu_target(value: object) -> str:
    """A GPU index, or ``all``: every GPU at once (an NVSwitch baseboard before Hopper)."""
    return ALL_GPUS if value == ALL_GPUS else _gpu_index(value)


def _release(value: object) -> str:
    """``container:NAME|unit:NAME.service…`` (empty: the NVIDIA daemons by unit name)."""
    if value == "":
        return ""
    if not isinstance(value, str) or len(value) > 2000:
        raise validate.InvalidIdentifier("release", value, "unit:NAME or container:NAME, |-joined")
    out = []
    for kind, name in parse_release(value):
        ok = (kind == "container" and CONTAINER_RE.match(name) is not None) or (
            kind == "unit" and name.endswith(".service")
            and validate.is_valid(validate.unit_name, name))
        if not ok or f"{kind}:{name}" in out:
            raise validate.InvalidIdentifier("release", value,
                                             "unit:NAME.service or container:NAME, each once")
        out.append(f"{kind}:{name}")
    if len(out) > 16:
        raise validate.InvalidIdentifier("release", value, "at most 16 daemons")
    return RELEASE_SEP.join(out)


def _marker(value: object) -> str:
    return validate.path_under(value, ("/run/incident-bot",))


PATH_SEP = "|"  # not in the path grammar: joins the files of one disk.cleanup
MAX_PATHS = 500


def _paths(value: object) -> str:
    """``|``-joined absolute file paths, grammar only. Where they may be is the host's
    one set of allowed prefixes (``Hosts.act_options``: the inventory's
    ``allowed_path_prefixes``), checked in the preflight: the same set the diagnosis
    searched, so a proposal is never refused by a second, different list."""
    if not isinstance(value, str) or not value:
        raise validate.InvalidIdentifier("paths", value, "one or more paths joined by |")
    parts = value.split(PATH_SEP)
    if len(parts) > MAX_PATHS:
        raise validate.InvalidIdentifier("paths", value, f"at most {MAX_PATHS} paths")
    return PATH_SEP.join(_file_path(p) for p in parts)


def _file_path(value: str) -> str:
    clean = validate.abs_path(value)
    if clean == "/" or clean.count("/") < 2:
        raise validate.InvalidIdentifier("paths", value, "a file below a top-level directory")
    return clean


def _mount(value: object) -> str:
    """The mount point a cleanup frees space on (empty: any mount counts)."""
    return "" if value == "" else validate.abs_path(value)


def _pct(value: object) -> str:
    if not isinstance(value, str) or not value.isdigit() or not 0 <= int(value) <= 100:
        raise validate.InvalidIdentifier("full_pct", value, "a whole percentage, 0..100")
    return str(int(value))


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


def _systemctl(verb: str, unit: str, timeout_s: float) -> RemoteStep:
    return RemoteStep(verb, ("systemctl", verb, unit), timeout_s)


def _stop_disable(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (_systemctl("stop", p["unit"], 15.0), _systemctl("disable", p["unit"], 10.0))


def _mask(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (_systemctl("stop", p["unit"], 15.0), _systemctl("mask", p["unit"], 10.0))


def _revert(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    """Back to the captured state: the file state first, then the active state.

    A masked unit cannot be started, so a unit captured masked-and-active is started
    before it is masked again.
    """
    unit, file_state, active = p["unit"], p["unit_file_state"], p["active_state"]
    steps = [_systemctl("unmask", unit, 10.0)] if file_state != "masked" else []
    if file_state in ("enabled", "disabled"):
        steps.append(_systemctl(file_state[:-1], unit, 10.0))  # enable | disable
    steps.append(_systemctl("start" if active == "active" else "stop", unit, 30.0))
    if file_state == "masked":
        steps.append(_systemctl("mask", unit, 10.0))
    return tuple(steps)


def _terminate(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("term", ("kill", "-TERM", p["pid"]), 5.0, binary=True),
            RemoteStep("kill", ("kill", "-KILL", p["pid"]), 5.0, binary=True))


def _vacuum(p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
    return (RemoteStep("vacuum", ("journalctl", f"--vacuum-size={p['size']}"), 120.0),)


_UNIT = ParamSpec("unit", validate.unit_name, "a systemd unit name, e.g. vllm.service")
_PID = ParamSpec("pid", validate.pid, "a process id")
_NODE = ParamSpec("node", validate.slurm_node, "a Slurm node name, e.g. gpu-01")
_JOB = ParamSpec("job", validate.slurm_job, "a Slurm job id running on that node")
_OVERRIDE = ParamSpec("override", _choice("override", ("no", "yes")),
                      "yes: act although systemd restarts the process (audited)", default="no")

CATALOG: dict[str, ActionSpec] = {spec.kind: spec for spec in (
    ActionSpec("systemd.stop_disable", "stopped and disabled", (_UNIT,), _stop_disable,
               risk="stops the service now and keeps it from starting at boot",
               frees_gpus=True, revertable=True),
    ActionSpec("systemd.mask", "stopped and masked", (_UNIT,), _mask,
               risk="stops the service; nothing can start it until it is unmasked",
               frees_gpus=True, revertable=True),
    ActionSpec("systemd.revert", "restored", (
        _UNIT,
        ParamSpec("unit_file_state", _choice("unit_file_state", ("enabled", "disabled", "masked")),
                  "enabled, disabled or masked"),
        ParamSpec("active_state", _choice("active_state", ("active", "inactive")),
                  "active or inactive"),
    ), _revert, risk="starts the service again if it was running: it may take the GPUs back"),
    ActionSpec("systemd.mask_force", "stopped and force-masked", (_UNIT,), _mask_force,
               risk="replaces the unit's own file in /etc/systemd/system with a link to "
                    "/dev/null: the file is lost (back it up first); unmask leaves no unit",
               frees_gpus=True),
    ActionSpec("process.terminate", "terminated", (_PID, _OVERRIDE), _terminate,
               risk="SIGTERM, then SIGKILL after a grace period; unsaved work is lost",
               frees_gpus=True),
    ActionSpec("process.sigterm", "sent SIGTERM to", (_PID, _OVERRIDE), _sigterm,
               risk="asks the process to exit; waits its unit's TimeoutStopSec",
               frees_gpus=True),
    ActionSpec("process.sigkill", "killed", (_PID, _OVERRIDE), _sigkill,
               risk="SIGKILL: no cleanup, unsaved work is lost; GPU memory may stay held",
               frees_gpus=True),
    ActionSpec("gpu.reset", "reset", (
        ParamSpec("gpu", _gpu_target, "a GPU index, or all"),
        ParamSpec("release", _release, "what holds /dev/nvidia*: unit:NAME or container:NAME, "
                                       "|-joined (default: the NVIDIA daemons' units)",
                  default=""),
    ), _gpu_reset,
               risk="resets the GPU (or every GPU): refused while any process uses it; what "
                    "holds its device files (persistenced, DCGM, dcgm-exporter as a unit or a "
                    "container, Fabric Manager where needed) is stopped around the reset and "
                    "started again, also when the reset fails", frees_gpus=True),
    ActionSpec("rma.handoff", "handed to RMA", (
        ParamSpec("incident", validate.incident_ref, "the incident the report is for"),
    ), _rma_handoff,
               risk="runs nvidia-bug-report.sh on the host (a few minutes of driver queries); "
                    "the node stays out of service for the RMA"),
    ActionSpec("host.reboot", "rebooted", (), _reboot,
               risk="reboots the host: every process on it stops; units enabled at boot start"),
    ActionSpec("systemd.dropin", "installed the incident-bot drop-in for", (
        _UNIT,
        ParamSpec("timeout_stop_s", _seconds, "TimeoutStopSec in seconds", default="30"),
        ParamSpec("marker", _marker, "reservation marker path", default=RESERVATION_MARKER),
    ), _dropin, risk="changes how systemd restarts the unit (Restart=on-failure, a start guard)",
        revertable=True),
    ActionSpec("systemd.dropin_revert", "removed the incident-bot drop-in for", (_UNIT,),
               _dropin_revert, risk="the unit restarts as its own file says again"),
    ActionSpec("disk.journal_vacuum", "vacuumed",
               (ParamSpec("size", validate.size, "journal size to keep, e.g. 500M"),), _vacuum,
               risk="deletes the oldest archived journal files"),
    ActionSpec("disk.cleanup", "deleted", (
        ParamSpec("paths", _paths, "files to delete, joined by |"),
        ParamSpec("need_bytes", _bytes, "bytes that must be freed", default="0"),
        ParamSpec("mount", _mount, "the full mount it frees space on", default=""),
        ParamSpec("full_pct", _pct, "verified only once the mount is below this", default="0"),
    ), _cleanup, risk="deletes the listed cache, checkpoint and core files for good"),
    ActionSpec("slurm.drain", "drained", (
        _NODE,
        ParamSpec("reason", validate.slurm_reason, "why, in plain words (the finding)"),
        ParamSpec("incident", validate.incident_ref, "the incident the reason names", default=""),
    ), _slurm_drain, risk=strings.SLURM_DRAIN_RISK, revertable=True),
    ActionSpec("slurm.resume", "resumed", (_NODE,), _slurm_resume,
               risk=strings.SLURM_RESUME_RISK),
    ActionSpec("slurm.requeue", "requeued", (_NODE, _JOB), _slurm_requeue,
               risk=strings.SLURM_REQUEUE_RISK),
    ActionSpec("slurm.cancel", "cancelled", (_NODE, _JOB), _slurm_cancel,
               risk=strings.SLURM_CANCEL_RISK),
    ActionSpec("extraction.resume", "resumed", (ParamSpec("job", job_id, "an extraction job id"),),
               lambda p: (), risk="restarts the extraction where it stopped", remote=False),
    ActionSpec("extraction.resume_override", "resumed despite the failed health gate",
               (ParamSpec("job", job_id, "an extraction job id"),), lambda p: (),
               risk="runs the extraction on a host whose GPU health gate failed: it may crash "
                    "again or write wrong results", remote=False),
)}


def get(kind: str) -> ActionSpec:
    try:
        return CATALOG[kind]
    except KeyError:
        known = ", ".join(sorted(CATALOG))
        raise ActionRefused(f"unknown action kind {kind!r} (known: {known})") from None


def steps(kind: str, params: Mapping[str, object]
          ) -> tuple[ActionSpec, dict[str, str], tuple[RemoteStep, ...]]:
    """Validate and render in one go: the only way commands are made."""
    spec = get(kind)
    clean = spec.validate(params)
    return spec, clean, spec.render(clean)


def plan(kind: str, params: Mapping[str, object], target: SSHTarget | None = None) -> list[str]:
    """The exact commands an action may run on ``target``, in order (what chat shows).

    Steps whose effect already holds are skipped at run time; nothing else is added.
    """
    spec, clean, rendered = steps(kind, params)
    if not spec.remote:
        forced = " despite the failed health gate" if kind.endswith("_override") else ""
        return [f"(on the bot) resume extraction job {clean['job']}{forced}"]
    sudo = bool(target and target.sudo)
    return [s.text(sudo) for s in rendered]


def dropin_diff(params: Mapping[str, object]) -> str:
    """The drop-in as a unified diff against nothing: what the thread shows before approval."""
    clean = get("systemd.dropin").validate(params)
    path = dropin_path(clean["unit"])
    lines = [f"{line}\n" for line in dropin_lines(clean)]
    return "".join(difflib.unified_diff([], lines, fromfile="/dev/null", tofile=path))


def parse_params(pairs: list[str]) -> dict[str, str]:
    """CLI ``key=value`` words to a dict; validation happens in the catalog."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ActionRefused(f"expected key=value, got {pair!r}")
        if key in out:
            raise ActionRefused(f"parameter {key!r} given twice")
        out[key] = value
    return out
