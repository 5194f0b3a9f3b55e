"""Capture the before-state of an action: what Revert restores and verify compares to.

The unit (or process) the action touches must be readable, or the action does not
run: acting blind is what the bot exists to avoid. GPU and journal readings are
evidence; a host without ``nvidia-smi`` still gets its unit stopped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.domain import validate
from bot.domain.host_state import CapturedState, GpuHolder, GpuState, SlurmCapture, UnitState
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
from bot.remediation.slurm import read_status
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.parsers.systemd import docker_id_from_scope

if TYPE_CHECKING:
    from bot.remediation.actions.base import Action


def capture(runner: SSHRunner, target: SSHTarget, spec: Action, params: Mapping[str, str],
            options: RemediationOptions) -> CapturedState:
    """Read what the action will change (the parameters name the subject; the action says
    what else it needs). ``ProbeFailed`` if the subject cannot be read."""
    t = options.probe_timeout_s
    named = params if spec.reads_subject else {}
    units = (read_unit(runner, target, named["unit"], t),) if "unit" in named else ()
    processes = (read_process(runner, target, named["pid"], t),) if "pid" in named else ()
    errors: list[str] = []
    gpus: list[GpuState] = []
    holders: list[GpuHolder] = []
    if spec.wants_gpus():
        try:
            gpus, holders = read_gpus(runner, target, t)
        except ProbeFailed as exc:
            errors.append(str(exc))
    journal = None
    if spec.capture_journal():
        journal = read_journal_bytes(runner, target, t)
    owning = {p.unit for p in processes if p.alive and p.unit}
    owners = tuple(_owner(runner, target, name, t)  # a hostile name is never sent
                   for name in sorted(owning) if validate.is_valid(validate.unit_name, name))
    owners += spec.capture_holders(runner, target, params, t)
    avail = read_disk_avail(runner, target, t) if spec.capture_disks() else {}
    slurm = _slurm(runner, target, named, t)
    return CapturedState(
        kind=spec.kind, params=dict(params), host=target.name, captured_at=time.time(),
        units=units, gpus=tuple(gpus), holders=tuple(holders), processes=processes,
        journal_bytes=journal, errors=tuple(errors), owners=owners, disk_avail=avail,
        slurm=slurm)


def _slurm(runner: SSHRunner, target: SSHTarget, params: Mapping[str, str],
           timeout_s: float) -> SlurmCapture | None:
    """The node's state, reason and jobs before an action on a Slurm node (``ProbeFailed``
    if Slurm cannot say: a drain is never sent blind)."""
    if "node" not in params:
        return None
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
