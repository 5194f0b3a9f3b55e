"""What remediation reads of a host, each reading one or more ``playbooks.probes`` run
through ``probe_runner``: a unit with the PIDs in its cgroup, a process, the GPUs and
their holders, the disks, the journal, a container's restart policy, the NVLink fabric.

These read only: no ``sudo`` except for the journal, which a non-root user cannot size.
Output from the host is untrusted: the parsers keep numbers and identifiers, and no
text read here is ever put back on a command line.
"""

from __future__ import annotations

from dataclasses import replace

from bot.domain.host_state import GpuHolder, GpuState, ProcState, UnitState
from bot.remediation.probe_runner import answered, ask, require_ok, run_probe, run_probes
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks import probes
from playbooks.parsers.disk import avail_by_mount, usage_by_mount
from playbooks.parsers.systemd import docker_id_from_scope, unit_state


def read_unit(runner: SSHRunner, target: SSHTarget, unit: str, timeout_s: float) -> UnitState:
    """Unit state plus the PIDs in its cgroup (``systemctl show`` exits 0 for unknown units)."""
    (show, props), (ps, units) = run_probes(runner, target, [
        probes.show_unit(unit, probes.UNIT_STATE_PROPERTIES), probes.pid_units()], timeout_s)
    require_ok(ps)
    require_ok(show)
    return unit_state(unit, props, tuple(sorted(p for p, u in units.items() if u == unit)))


def read_dropins(runner: SSHRunner, target: SSHTarget, unit: str,
                 timeout_s: float) -> dict[str, str]:
    """The unit's restart settings and the drop-in files systemd has loaded."""
    return ask(runner, target, probes.show_unit(unit, probes.DROPIN_PROPERTIES, "dropins"),
               timeout_s)


def read_gpus(runner: SSHRunner, target: SSHTarget,
              timeout_s: float) -> tuple[list[GpuState], list[GpuHolder]]:
    """Per-GPU memory and the processes holding it, with their units (the holders are
    evidence: without them, or their units, the GPUs still answer)."""
    (gpus, states), (apps, rows), (ps, units) = run_probes(runner, target, [
        probes.gpu_memory(), probes.compute_apps(), probes.pid_units()], timeout_s)
    units = units if ps.ok else {}
    holders = [GpuHolder(a.pid, a.gpu_uuid, float(a.used_memory_mib or 0), units.get(a.pid))
               for a in (rows if apps.ok else []) if a.pid is not None]
    require_ok(gpus)
    return states, holders


def read_gpu_memory(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> list[GpuState]:
    return ask(runner, target, probes.gpu_memory(), timeout_s)


def read_process(runner: SSHRunner, target: SSHTarget, pid: str, timeout_s: float) -> ProcState:
    """Alive or gone, and its unit; its command line comes separately, as evidence only."""
    (ident, state), (args, shown) = run_probes(runner, target, [
        probes.process(int(pid)), probes.process_args(int(pid))], timeout_s)
    answered(ident)
    if ident.exit_status != 0 or not state.alive:
        return ProcState(int(pid), alive=False)
    return replace(state, command=shown if args.ok else "")


def read_disk_avail(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> dict[str, int]:
    """Mount -> bytes available."""
    return avail_by_mount(ask(runner, target, probes.df(), timeout_s))


def read_disk_usage(runner: SSHRunner, target: SSHTarget,
                    timeout_s: float) -> dict[str, tuple[int, int]]:
    """Mount -> (bytes used, bytes available)."""
    return usage_by_mount(ask(runner, target, probes.df(), timeout_s))


def regular_files(runner: SSHRunner, target: SSHTarget, paths: list[str],
                  timeout_s: float) -> set[str]:
    """Which of ``paths`` are regular files now (``find`` exits 1 when one is missing)."""
    return run_probe(runner, target, probes.regular_files(paths), timeout_s)[1]


def read_container_owner(runner: SSHRunner, target: SSHTarget, scope: str,
                         timeout_s: float) -> UnitState | None:
    """A container's restart policy, as the owner of its processes. None when docker
    cannot tell."""
    cid = docker_id_from_scope(scope)
    if cid is None:
        return None
    result, owner = run_probe(runner, target, probes.container_owner(scope, cid), timeout_s)
    return owner if result.ok else None


def read_journal_bytes(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> int | None:
    """Journal size; through ``sudo -n`` for non-root users (allowlisted, read-only)."""
    return ask(runner, target, probes.journal_usage(sudo=target.sudo), timeout_s)
