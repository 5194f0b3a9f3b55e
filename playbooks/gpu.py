"""GPU memory and utilization over a window: per-GPU summaries and the one-shot probe
remediation uses to verify that memory was freed.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core import fmt
from bot.ssh.base import Command, SSHRunner, SSHTarget
from playbooks.commands import QUERY_GPU_COMMAND
from playbooks.parsers.nvidia import GpuSample, parse_query_gpu, rows_of

__all__ = ["QUERY_GPU_COMMAND", "GpuStat", "gb", "probe_gpus", "summarize"]
MIB = 1 << 20


@dataclass(frozen=True)
class GpuStat:
    """One GPU across the window: the most memory used and the busiest sample."""

    index: int
    uuid: str
    name: str
    memory_used_mib: int | None
    memory_total_mib: int | None
    max_util_pct: int | None
    samples: int

    def held(self, held_mib: int) -> bool:
        return (self.memory_used_mib or 0) > held_mib

    def idle(self, idle_util_pct: int) -> bool:
        """Never above the threshold; unknown utilization ([N/A]) is not called idle."""
        return self.max_util_pct is not None and self.max_util_pct <= idle_util_pct


def summarize(samples: list[list[GpuSample]]) -> list[GpuStat]:
    """Fold samples into one ``GpuStat`` per GPU index, in index order."""
    by_index: dict[int, list[GpuSample]] = {}
    for sample in samples:
        for gpu in sample:
            by_index.setdefault(gpu.index, []).append(gpu)
    return [_fold(rows) for _, rows in sorted(by_index.items())]


def _fold(rows: list[GpuSample]) -> GpuStat:
    mem = [r.memory_used_mib for r in rows if r.memory_used_mib is not None]
    util = [r.utilization_pct for r in rows if r.utilization_pct is not None]
    total = next((r.memory_total_mib for r in rows if r.memory_total_mib), None)
    last = rows[-1]
    return GpuStat(index=last.index, uuid=last.uuid, name=last.name,
                   memory_used_mib=max(mem) if mem else None, memory_total_mib=total,
                   max_util_pct=max(util) if util else None, samples=len(rows))


def gb(mib: int | None) -> str:
    """MiB (what nvidia-smi reports) as GiB, like every message: 77600 MiB -> '75.8 GiB'."""
    return "? GiB" if mib is None else fmt.gib(mib)


def probe_gpus(runner: SSHRunner, target: SSHTarget, timeout_s: float = 10.0) -> list[GpuSample]:
    """One ``nvidia-smi`` sample (remediation's verify step). Raises ``SSHError`` if unreachable;
    an empty list means nvidia-smi gave nothing readable."""
    result = runner.run(target, Command("gpus", QUERY_GPU_COMMAND, timeout_s))
    return rows_of(parse_query_gpu(result.stdout))
