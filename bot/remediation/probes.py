"""Read-only probes remediation needs, and their pure parsers.

These run before (capture), during (re-probe after a timeout) and after (verify) an
action. They read only: no ``sudo`` except for the journal, which a non-root user
cannot size. Output from the host is untrusted: parsers keep numbers and identifiers
and never hand text back to a command line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import replace

from bot.domain.findings import ProbeResult
from bot.domain.host_state import GpuHolder, GpuState, ProcState, UnitState
from bot.ssh.base import Command, SSHRunner, SSHTarget
from playbooks.commands import QUERY_APPS_COMMAND as APPS_QUERY
from playbooks.commands import QUERY_GPU_COMMAND as GPU_QUERY
from playbooks.parsers.common import size_bytes
from playbooks.parsers.disk import parse_journal_usage
from playbooks.parsers.nvidia import parse_compute_apps, parse_query_gpu
from playbooks.parsers.ps import cgroup_units as parse_cgroups
from playbooks.parsers.systemd import parse_show, unit_from_cgroup

SHOW_PROPS = ("LoadState,ActiveState,SubState,UnitFileState,MainPID,Restart,FragmentPath,"
              "RestartUSec,NRestarts,TimeoutStopUSec")
__all__ = ["APPS_QUERY", "GPU_QUERY", "parse_cgroups"]  # spelled once, in playbooks
PS_CGROUPS = "ps -eo pid=,cgroup="
JOURNAL_USAGE = "journalctl --disk-usage"


class ProbeFailed(Exception):
    """A probe that could not answer (timeout, nonzero exit, unparsable)."""

    def __init__(self, probe: ProbeResult, why: str) -> None:
        super().__init__(f"{probe.name}: {why}")
        self.probe = probe


def plain(target: SSHTarget) -> SSHTarget:
    """The same host without the pool's ``sudo -n`` wrapper (reads need no root)."""
    return replace(target, sudo=False) if target.sudo else target


# --- pure parsers (the diagnostics' parsers, composed) ---------------------------------
_SPAN = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0,
         "min": 60.0, "m": 60.0, "h": 3600.0, "hr": 3600.0, "d": 86400.0}
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def parse_timespan(text: str, default: float = 0.0) -> float:
    """systemd's time spans (``100ms``, ``10s``, ``1min 30s``, ``infinity``) in seconds."""
    text = text.strip().lower()
    if text == "infinity":
        return float("inf")
    parts = _SPAN_PART.findall(text)
    if not parts or _SPAN_PART.sub("", text).strip():
        return default
    total = 0.0
    for number, unit in parts:
        if unit not in _SPAN and unit != "":
            return default
        total += float(number) * _SPAN.get(unit, 1e-6 if unit == "" else 1.0)
    return total


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def unit_state(name: str, props: dict[str, str], pids: tuple[int, ...] = ()) -> UnitState:
    return UnitState(
        name=name, load_state=props.get("LoadState", ""), active_state=props.get("ActiveState", ""),
        sub_state=props.get("SubState", ""), unit_file_state=props.get("UnitFileState", ""),
        main_pid=_int(props.get("MainPID", "0")), restart=props.get("Restart", ""),
        fragment_path=props.get("FragmentPath", ""), pids=pids,
        restart_s=parse_timespan(props.get("RestartUSec", ""), 0.1),
        n_restarts=_int(props.get("NRestarts", "0")),
        timeout_stop_s=parse_timespan(props.get("TimeoutStopUSec", ""), 90.0))


def gpu_states(text: str) -> list[GpuState]:
    """Rows with both memory figures; ``[N/A]`` rows are left out."""
    return [GpuState(g.index, g.uuid, float(g.memory_used_mib), float(g.memory_total_mib))
            for g in parse_query_gpu(text)
            if g.memory_used_mib is not None and g.memory_total_mib is not None]


def gpu_apps(text: str) -> list[tuple[int, str, float]]:
    """(pid, gpu uuid, MiB) per compute app; empty inside containers."""
    return [(a.pid, a.gpu_uuid, float(a.used_memory_mib or 0))
            for a in parse_compute_apps(text) if a.pid is not None]


def parse_size(text: str) -> int | None:
    """``500M`` → bytes (journald's sizes are 1024-based)."""
    return size_bytes(text)


# --- I/O helpers ---------------------------------------------------------------------
def run_probe(runner: SSHRunner, target: SSHTarget, name: str, text: str,
         timeout_s: float) -> ProbeResult:
    return runner.run(plain(target), Command(name, text, timeout_s))


def require_ok(probe: ProbeResult) -> ProbeResult:
    if probe.timed_out:
        raise ProbeFailed(probe, "timed out")
    if probe.exit_status != 0 or probe.error:
        raise ProbeFailed(probe, f"exit {probe.exit_status}: {(probe.error or probe.stderr)[:200]}")
    return probe


def read_unit(runner: SSHRunner, target: SSHTarget, unit: str, timeout_s: float) -> UnitState:
    """Unit state plus the PIDs in its cgroup (``systemctl show`` exits 0 for unknown units)."""
    text = f"systemctl show {shlex.quote(unit)} -p {SHOW_PROPS}"
    show, ps = runner.run_many(plain(target), [Command("unit", text, timeout_s),
                                               Command("cgroups", PS_CGROUPS, timeout_s)])
    pids = tuple(sorted(p for p, u in parse_cgroups(require_ok(ps).stdout).items() if u == unit))
    return unit_state(unit, parse_show(require_ok(show).stdout), pids)


def read_gpus(runner: SSHRunner, target: SSHTarget,
              timeout_s: float) -> tuple[list[GpuState], list[GpuHolder]]:
    """Per-GPU memory and the processes holding it, with their units."""
    gpus, apps, ps = runner.run_many(plain(target), [
        Command("gpus", GPU_QUERY, timeout_s), Command("gpu-apps", APPS_QUERY, timeout_s),
        Command("cgroups", PS_CGROUPS, timeout_s)])
    units = parse_cgroups(ps.stdout) if ps.ok else {}
    holders = [GpuHolder(pid, uuid, mib, units.get(pid))
               for pid, uuid, mib in gpu_apps(apps.stdout if apps.ok else "")]
    return gpu_states(require_ok(gpus).stdout), holders


def read_gpu_memory(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> list[GpuState]:
    return gpu_states(require_ok(run_probe(runner, target, "gpus", GPU_QUERY, timeout_s)).stdout)


def read_process(runner: SSHRunner, target: SSHTarget, pid: str, timeout_s: float) -> ProcState:
    """Alive or gone, and its unit. The cgroup is read alone so that the command line
    (hostile text, spaces and all) can never shift the fields; it comes separately, as
    evidence only, first line, cut short."""
    q = shlex.quote(pid)
    ident, args = runner.run_many(plain(target), [
        Command("process", f"ps -o pid=,cgroup= -p {q}", timeout_s),
        Command("process-args", f"ps -o args= -p {q}", timeout_s)])
    if ident.timed_out or ident.error:
        raise ProbeFailed(ident, "no answer")
    first = ident.stdout.strip().splitlines()[0] if ident.stdout.strip() else ""
    parts = first.split(None, 1)
    if ident.exit_status != 0 or not parts or parts[0] != pid:
        return ProcState(int(pid), alive=False)
    unit = unit_from_cgroup(parts[1]) if len(parts) > 1 else None
    shown = args.stdout.strip().splitlines()[0][:300] if args.ok and args.stdout.strip() else ""
    return ProcState(int(pid), alive=True, unit=unit, command=shown)


DF_AVAIL = "df -B1 --output=avail,target"


def parse_df_avail(text: str) -> dict[str, int]:
    """``df -B1 --output=avail,target`` → mount → bytes available (header skipped)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].isdigit() and parts[1].startswith("/"):
            out[parts[1].strip()] = int(parts[0])
    return out


def read_disk_avail(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> dict[str, int]:
    return parse_df_avail(require_ok(run_probe(runner, target, "df", DF_AVAIL, timeout_s)).stdout)


DF_USAGE = "df -B1 --output=used,avail,target"


def parse_df_usage(text: str) -> dict[str, tuple[int, int]]:
    """``df -B1 --output=used,avail,target`` → mount → (bytes used, bytes available)."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() \
                and parts[2].startswith("/"):
            out[parts[2].strip()] = (int(parts[0]), int(parts[1]))
    return out


def read_disk_usage(runner: SSHRunner, target: SSHTarget,
                    timeout_s: float) -> dict[str, tuple[int, int]]:
    return parse_df_usage(require_ok(run_probe(runner, target, "df", DF_USAGE,
                                               timeout_s)).stdout)


def fabric_states(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> list[str]:
    """Each GPU's NVLink fabric state from ``nvidia-smi -q -x`` (``Completed``, ``In
    Progress``...); empty on a host without NVSwitches (the field reads N/A) or when the
    document cannot be read."""
    from playbooks.commands import QUERY_XML_COMMAND
    from playbooks.parsers.nvidia_xml import parse_query_xml

    probe = run_probe(runner, target, "fabric", QUERY_XML_COMMAND, timeout_s)
    if not probe.ok:
        return []
    return [g.fabric_state for g in parse_query_xml(probe.stdout).gpus if g.fabric_state]


def regular_files(runner: SSHRunner, target: SSHTarget, paths: list[str],
                  timeout_s: float) -> set[str]:
    """Which of ``paths`` are regular files now (a symlink or a directory is not)."""
    text = ("find " + " ".join(shlex.quote(p) for p in paths)
            + " -maxdepth 0 -type f -printf '%p\\0'")
    probe = run_probe(runner, target, "files", text, timeout_s)  # exit 1 when one is missing
    return {p for p in probe.stdout.split("\0") if p}


_DOCKER_SCOPE = re.compile(r"^docker-([0-9a-f]{12,64})\.scope$")
DOCKER_POLICY = "{{.HostConfig.RestartPolicy.Name}}"
DOCKER_RESTARTS = frozenset({"always", "unless-stopped", "on-failure"})


def container_of(unit: str | None) -> str | None:
    """``docker-<id>.scope`` (a container's cgroup) → the container id."""
    m = _DOCKER_SCOPE.match(unit or "")
    return m[1] if m else None


def read_container_owner(runner: SSHRunner, target: SSHTarget, scope: str,
                         timeout_s: float) -> UnitState | None:
    """A container's restart policy, as the owner of its processes (docker restarts at
    once, 100 ms the first time). None when docker cannot tell."""
    cid = container_of(scope)
    if cid is None:
        return None
    text = f"docker inspect --format {shlex.quote(DOCKER_POLICY)} {cid}"
    probe = run_probe(runner, target, "container", text, timeout_s)
    policy = probe.stdout.strip().splitlines()[0] if probe.ok and probe.stdout.strip() else ""
    if not policy:
        return None
    return UnitState(name=scope, load_state="loaded", active_state="active",
                     restart=policy if policy in DOCKER_RESTARTS else "no", restart_s=0.1,
                     fragment_path=f"docker:{cid}")


def read_journal_bytes(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> int | None:
    """Journal size; through ``sudo -n`` for non-root users (allowlisted, read-only)."""
    text = f"sudo -n {JOURNAL_USAGE}" if target.sudo else JOURNAL_USAGE
    probe = require_ok(run_probe(runner, target, "journal", text, timeout_s))
    return parse_journal_usage(probe.stdout + "\n" + probe.stderr)
