"""Who holds GPU memory, and what will start it again.

Holders come from ``nvidia-smi --query-compute-apps`` (each with its own memory on each
GPU); where it lists none although memory is in use (containers, PID namespaces) from
the processes holding /dev/nvidia*, then from command lines that look like inference
servers, then, when no process at all is visible (a sandboxed container: its PIDs live
in a namespace this login cannot see), from the active units and running containers
that run a GPU server. For each holder the restarter is its systemd unit (from its
cgroup, else ``systemctl status PID``) with unit-file state and ``Restart=``, a crontab
``@reboot`` line, a docker restart policy, or nothing. Pure functions here;
``playbooks.trace`` runs the probes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from bot.domain import validate
from playbooks.parsers import host, nvidia, ps, slurm, systemd

# Processes that open /dev/nvidia* without holding memory for work.
GPU_HELPERS = ("nvidia-persistenced", "nv-hostengine", "dcgm", "nvidia-smi", "Xorg")
CRON_UNITS = ("cron.service", "crond.service", "cronie.service")
# Where our own SSH sessions run when logind does not give them a session scope.
SESSION_UNITS = ("ssh.service", "sshd.service", *CRON_UNITS)
HIDDEN = "unit, process not visible"  # ``found_by`` of a holder named by its unit or container


@dataclass(frozen=True)
class Restarter:
    """What starts a holder again: kind systemd | docker | cron | none."""

    kind: str
    name: str = ""
    unit_file_state: str = ""
    active_state: str = ""
    restart: str = ""  # Restart= or the docker restart policy
    detail: str = ""  # the cron line, the container image, a unit's FragmentPath, ...

    def describe(self) -> str:
        if self.kind == "systemd":
            return f"{self.name} ({self.unit_file_state or '?'}, Restart={self.restart or '?'})"
        if self.kind == "docker":
            return f"docker container {self.name} (restart policy {self.restart or 'no'})"
        if self.kind == "cron":
            return f"a crontab line '{self.detail}'"
        return "nothing (no unit, cron line or container restarts it)"


@dataclass(frozen=True)
class Holder:
    pid: int
    args: str
    user: str
    found_by: str  # "nvidia-smi", "/dev/nvidia*", "command line"
    gpu_uuids: tuple[str, ...] = ()
    used_mib: int | None = None
    elapsed_s: int | None = None
    cgroup_unit: str | None = None
    restarter: Restarter = field(default_factory=lambda: Restarter("none"))
    slurm_job: str | None = None  # a Slurm job's process: cancelled through Slurm, never killed
    gpu_mib: tuple[tuple[str, int], ...] = ()  # (gpu uuid, MiB) its own, where nvidia-smi says

    @property
    def kind(self) -> str | None:
        return ps.server_kind(self.args)

    @property
    def hidden(self) -> bool:
        """Named by its unit or container: no PID of it is visible to this login."""
        return self.found_by == HIDDEN

    def on(self, uuid: str) -> int | None:
        """Its own memory on one GPU (None where nvidia-smi could not map it)."""
        return next((mib for u, mib in self.gpu_mib if u == uuid), None)


def _is_helper(args: str) -> bool:
    first = args.split(" ", 1)[0].rsplit("/", 1)[-1]
    return any(first.startswith(h) for h in GPU_HELPERS)


def holders_from_apps(apps: list[nvidia.ComputeApp], procs: dict[int, ps.Proc]) -> list[Holder]:
    """One holder per PID, its GPUs and total memory across them."""
    by_pid: dict[int, list[nvidia.ComputeApp]] = {}
    for app in apps:
        if app.pid is not None:
            by_pid.setdefault(app.pid, []).append(app)
    out = []
    for pid, rows in by_pid.items():
        mib = [r.used_memory_mib for r in rows if r.used_memory_mib is not None]
        holder = _holder(pid, procs, "nvidia-smi", tuple(r.gpu_uuid for r in rows),
                         sum(mib) if mib else None, rows[0].process_name)
        per_gpu = tuple((r.gpu_uuid, r.used_memory_mib) for r in rows
                        if r.used_memory_mib is not None)
        out.append(replace(holder, gpu_mib=per_gpu))
    return out


def hidden_holders(shown: Mapping[str, Mapping[str, str]],
                   containers: Sequence[Mapping[str, object]]) -> list[Holder]:
    """Memory is held and no process is visible: the active units whose command line (or
    name) runs a GPU server, else the running containers given GPUs. Each is named by
    what can stop it; its PID (if systemd or docker gives one) is evidence only."""
    out = []
    for unit, props in shown.items():
        args = exec_args(props.get("ExecStart", ""))
        if props.get("ActiveState") != "active" or not (
                ps.server_kind(args) or ps.server_kind(unit.replace("-", " "))):
            continue
        restarter = Restarter("systemd", unit, props.get("UnitFileState", ""), "active",
                              props.get("Restart", ""), detail=props.get("FragmentPath", ""))
        out.append(Holder(_main_pid(props.get("MainPID", "")), args, props.get("User", ""),
                          HIDDEN, cgroup_unit=unit, restarter=restarter))
    if out:
        return out
    for box in containers:
        if box.get("running") and box.get("gpus"):
            restarter = Restarter("docker", str(box.get("name", "")),
                                  restart=str(box.get("restart_policy", "")),
                                  detail=str(box.get("image", "")))
            out.append(Holder(_main_pid(str(box.get("pid") or "")), str(box.get("image", "")),
                              "", HIDDEN, restarter=restarter))
    return out


def exec_args(exec_start: str) -> str:
    """``systemctl show -p ExecStart``'s ``{ path=… ; argv[]=ARGS ; … }`` -> ARGS."""
    m = re.search(r"argv\[\]=(.*?) ;", exec_start)
    return (m[1] if m else exec_start).strip()


def _main_pid(text: str) -> int:
    return int(text) if text.isdigit() else 0


def holders_from_devices(pids: list[int], procs: dict[int, ps.Proc]) -> list[Holder]:
    """PIDs with /dev/nvidia* open, less helpers such as nvidia-persistenced (no memory)."""
    held = [_holder(p, procs, "/dev/nvidia*") for p in sorted(set(pids))]
    return [h for h in held if h.args and not _is_helper(h.args)]


def holders_from_names(procs: dict[int, ps.Proc]) -> list[Holder]:
    return [_holder(p.pid, procs, "command line") for p in procs.values()
            if ps.server_kind(p.args) and not _is_helper(p.args)]


def _holder(pid: int, procs: dict[int, ps.Proc], found_by: str, uuids: tuple[str, ...] = (),
            mib: int | None = None, fallback_args: str = "") -> Holder:
    """A holder with its ps row (``fallback_args`` when ps did not list the PID)."""
    proc = procs.get(pid)
    if proc is None:
        return Holder(pid, fallback_args, "", found_by, uuids, mib)
    return Holder(pid, proc.args, proc.user, found_by, uuids, mib, proc.elapsed_s,
                  systemd.unit_from_cgroup(proc.cgroup), slurm_job=slurm_job_of(pid, procs))


def slurm_job_of(pid: int, procs: dict[int, ps.Proc], depth: int = 16) -> str | None:
    """The Slurm job a process belongs to: its cgroup names it (cgroup plugins), or a
    ``slurmstepd: [JOB.STEP]`` is among its ancestors (``proctrack/linuxproc``)."""
    seen: set[int] = set()
    while pid in procs and pid not in seen and len(seen) < depth:
        seen.add(pid)
        proc = procs[pid]
        job = slurm.job_of_cgroup(proc.cgroup) or slurm.job_of_stepd(proc.args)
        if job:
            return job
        pid = proc.ppid
    return None


def safe_unit(name: str | None) -> str | None:
    """The unit name if it passes systemd's grammar, else None (it stays evidence only)."""
    return name if name and validate.is_valid(validate.unit_name, name) else None


def units_to_show(holders: list[Holder], candidates: list[str]) -> list[str]:
    """Valid unit names worth a ``systemctl show``: holders' units and GPU-looking units."""
    names: list[str | None] = [h.cgroup_unit for h in holders]
    names += candidates
    out: list[str] = []
    for name in names:
        unit = safe_unit(name)
        if unit and unit.endswith(".service") and unit not in CRON_UNITS and unit not in out:
            out.append(unit)
    return out


def gpu_units(files: list[systemd.UnitFileRow], rows: list[systemd.UnitRow]) -> list[str]:
    """Units whose name (or an active one's description) looks like an inference server
    (vllm-*, sglang-*, "vLLM Kimi K2.5 ...")."""
    names = [f.unit for f in files] + [r.unit for r in rows]
    described = [r.unit for r in rows if r.active == "active" and ps.server_kind(r.description)]
    return sorted({n for n in names if ps.server_kind(n.replace("-", " "))} | set(described))


def watchdogs(found: list[Holder], procs: dict[int, ps.Proc]) -> dict[str, list[tuple[int, str]]]:
    """Other services whose command line names a holder's unit: they may start it again
    (``gpu-watchdog --ensure vllm.service``). Our own SSH sessions are never counted."""
    out: dict[str, list[tuple[int, str]]] = {}
    holder_pids = {x.pid for x in found}
    for unit in {x.cgroup_unit for x in found if safe_unit(x.cgroup_unit)}:
        assert unit is not None
        stem = re.escape(unit.removesuffix(".service"))
        pattern = re.compile(rf"(?<![\w.-]){stem}(?:\.service)?(?![\w.-])")
        for proc in procs.values():
            other = systemd.unit_from_cgroup(proc.cgroup)
            if (proc.pid in holder_pids or not other or other == unit or other in SESSION_UNITS
                    or not other.endswith(".service") or not pattern.search(proc.args)):
                continue
            out.setdefault(unit, []).append((proc.pid, other))
    return out


def cron_match(holder: Holder, crons: Sequence[host.CronLine]) -> host.CronLine | None:
    """An ``@reboot`` line that runs this holder's command (either contains the other)."""
    args = " ".join(holder.args.split())
    for line in crons:
        if line.schedule != "@reboot":
            continue
        command = " ".join(line.command.split())
        if command and args and (command in args or _core(args) in command):
            return line
    return None


def _core(args: str) -> str:
    """The command line without its interpreter path (``python3 -m x`` -> ``-m x``)."""
    head, _, rest = args.partition(" ")
    return rest or head


def restarter_for(holder: Holder, shown: Mapping[str, Mapping[str, str]],
                  containers: Sequence[Mapping[str, object]],
                  crons: Sequence[host.CronLine]) -> Restarter:
    """Decide what restarts ``holder`` from the facts gathered (pure)."""
    unit = holder.cgroup_unit or ""
    box_id = systemd.docker_id_from_scope(unit)
    if box_id is not None:
        return _docker(box_id, containers)
    line = cron_match(holder, crons)
    if line is not None:
        return Restarter("cron", line.user, detail=f"{line.schedule} {line.command}")
    props = shown.get(unit)
    if props is not None and unit not in CRON_UNITS:
        return Restarter("systemd", unit, props.get("UnitFileState", ""),
                         props.get("ActiveState", ""), props.get("Restart", ""),
                         detail=props.get("FragmentPath", ""))
    if unit.endswith(".service") and unit not in CRON_UNITS:
        return Restarter("systemd", unit)  # named by its cgroup, details unknown
    return Restarter("none")


def _docker(box_id: str, containers: Sequence[Mapping[str, object]]) -> Restarter:
    for box in containers:
        cid = str(box.get("id", ""))
        if cid and (cid.startswith(box_id) or box_id.startswith(cid)):
            return Restarter("docker", str(box.get("name", box_id[:12])),
                             restart=str(box.get("restart_policy", "")),
                             detail=str(box.get("image", "")))
    return Restarter("docker", box_id[:12])
