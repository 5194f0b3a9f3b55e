"""A host at a glance for ``/ir status HOST``: its GPUs (memory, utilization) and its real
filesystems, read now with one ``nvidia-smi`` query and one ``df`` over one connection.

Read-only, like every probe; a host that cannot be reached is said, never a crash. The
tool's error is kept (``SmiError``), so a GPU that cannot be read is not "no GPUs".
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.ssh.base import Command, SSHError, SSHRunner, SSHTarget
from playbooks import probes
from playbooks.commands import QUERY_GPU_COMMAND
from playbooks.parsers.disk import Filesystem
from playbooks.parsers.nvidia import GpuSample, parse_query_gpu
from playbooks.parsers.smi_errors import SmiError, smi_problems


@dataclass(frozen=True)
class Glance:
    host: str
    gpus: list[GpuSample] | SmiError
    filesystems: list[Filesystem]
    unreachable: str = ""  # why the host could not be read at all


def glance(runner: SSHRunner, target: SSHTarget, timeout_s: float = 5.0) -> Glance:
    """The GPUs and disks of ``target`` now (two probes in parallel)."""
    df = probes.df()
    try:
        gpu_run, df_run = runner.run_many(target, [
            Command("gpus", QUERY_GPU_COMMAND, timeout_s), Command(df.name, df.command, timeout_s)])
    except SSHError as exc:
        return Glance(target.name, [], [], unreachable=str(exc) or exc.kind)
    gpus = parse_query_gpu(gpu_run.stdout)
    if not isinstance(gpus, SmiError) and not gpus:
        said = smi_problems(gpu_run.stdout, gpu_run.stderr, gpu_run.exit_status,
                            gpu_run.timed_out, [], timeout_s)
        gpus = said[0] if said else gpus
    return Glance(target.name, gpus, [f for f in df.parse(df_run.stdout) if f.real])
