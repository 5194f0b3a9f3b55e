"""Capture the before-state of an action: what Revert restores and verify compares to.

The unit (or process) the action touches must be readable, or the action does not
run: acting blind is what the bot exists to avoid. GPU and journal readings are
evidence; a host without ``nvidia-smi`` still gets its unit stopped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from bot.domain import validate
from bot.domain.host_state import CapturedState, GpuHolder, GpuState, SlurmCapture, UnitState
from bot.remediation.catalog import ActionSpec
from bot.remediation.gpu_reset import capture_release
from bot.remediation.options import RemediationOptions
from bot.remediation.probe_runner import ProbeFailed
from bot.remediation.readings import (
    read_container_owner,
    read_disk_avail,
    read_gpus,
    read_journal_bytes,
    read_process,
    read_unit,
)
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.parsers.systemd import docker_id_from_scope


def capture(runner: SSHRunner, target: SSHTarget, spec: ActionSpec, params: Mapping[str, str],
            options: RemediationOptions) -> CapturedState:
    """Read what the action will change. ``ProbeFailed`` if the subject cannot be read."""
    t = options.probe_timeout_s
    units = (read_unit(runner, target, params["unit"], t),) if "unit" in params else ()
    processes = (read_process(runner, target, params["pid"], t),) if "pid" in params else ()
    errors: list[str] = []
    gpus: list[GpuState] = []
    holders: list[GpuHolder] = []
    if spec.frees_gpus or spec.kind == "systemd.revert":
        try:
            gpus, holders = read_gpus(runner, target, t)
        except ProbeFailed as exc:
            errors.append(str(exc))
    journal = None
    if spec.kind == "disk.journal_vacuum":
        journal = read_journal_bytes(runner, target, t)
    named = {p.unit for p in processes if p.alive and p.unit}
    owners = tuple(_owner(runner, target, name, t)  # a hostile name is never sent
                   for name in sorted(named) if validate.is_valid(validate.unit_name, name))
    if spec.kind == "gpu.reset":  # what holds the device, stopped around the reset
        owners += capture_release(runner, target, dict(params), t)
    avail = read_disk_avail(runner, target, t) if spec.kind == "disk.cleanup" else {}
    slurm = _slurm(runner, target, spec, params, t)
    return CapturedState(
        kind=spec.kind, params=dict(params), host=target.name, captured_at=time.time(),
        units=units, gpus=tuple(gpus), holders=tuple(holders), processes=processes,
        journal_bytes=journal, errors=tuple(errors), owners=owners, disk_avail=avail,
        slurm=slurm)


def _slurm(runner: SSHRunner, target: SSHTarget, spec: ActionSpec, params: Mapping[str, str],
           timeout_s: float) -> SlurmCapture | None:
    """The node's state, reason and jobs before a ``slurm.*`` action (``ProbeFailed`` if
    Slurm cannot say: a drain is never sent blind)."""
    if "node" not in params:
        return None
    from bot.remediation.slurm import read_status

    return read_status(runner, target, params["node"], timeout_s)


def _owner(runner: SSHRunner, target: SSHTarget, name: str, timeout_s: float) -> UnitState:
    """A container's scope is owned by docker's restart policy; anything else by systemd."""
    if docker_id_from_scope(name):
        box = read_container_owner(runner, target, name, timeout_s)
        if box is not None:
            return box
    return read_unit(runner, target, name, timeout_s)


def subject_pids(captured: CapturedState) -> set[int]:
    """The processes the action is meant to end: the unit's cgroup, or the PID."""
    pids = {p for u in captured.units for p in u.pids}
    pids |= {u.main_pid for u in captured.units if u.main_pid}
    pids |= {p.pid for p in captured.processes if p.alive}
    return pids
