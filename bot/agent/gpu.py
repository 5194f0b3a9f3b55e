"""NVML sampling and the "VRAM held idle" rule.

``pynvml`` (nvidia-ml-py) is imported only when the agent starts sampling, so hosts
without it still run the other checks; without the NVML library the GPU check is
skipped with one log line. Utilisation is the maximum of ``nvmlDeviceGetSamples``
since the previous tick (the whole window, not one instant), falling back to
``nvmlDeviceGetUtilizationRates`` where samples are not supported.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)
NOT_SUPPORTED, NOT_FOUND = 3, 6  # NVML_ERROR_* codes (stable across driver versions)


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    name: str
    used_mib: int
    total_mib: int
    util_pct: int  # max over the window
    processes: tuple[tuple[int, int], ...] | None  # (pid, MiB); None if NVML can't say

    @property
    def used_pct(self) -> float:
        return 100.0 * self.used_mib / self.total_mib if self.total_mib else 0.0

    def to_dict(self) -> dict[str, Any]:
        procs = None if self.processes is None else [
            {"pid": p, "used_mib": m} for p, m in self.processes]
        return {"index": self.index, "uuid": self.uuid, "name": self.name,
                "used_mib": self.used_mib, "total_mib": self.total_mib,
                "util_pct": self.util_pct, "processes": procs}


class NvmlSampler:
    def __init__(self, module: ModuleType | None = None) -> None:
        self.nvml = module
        self.ready = False
        self.tried = False
        self.last_ts: dict[int, int] = {}

    def start(self) -> bool:
        """Import and init NVML once; False (logged) when there is no GPU stack here."""
        if self.tried:
            return self.ready
        self.tried = True
        try:
            self.nvml = self.nvml or importlib.import_module("pynvml")
            self.nvml.nvmlInit()
        except ImportError as exc:
            log.warning("GPU check skipped: pynvml (nvidia-ml-py) not installed (%s)", exc)
            return False
        except Exception as exc:  # NVMLError: no library, no driver, ...
            log.warning("GPU check skipped: NVML unavailable (%s)", exc)
            return False
        self.ready = True
        return True

    def sample(self) -> list[GpuReading]:
        if not self.start():
            return []
        assert self.nvml is not None
        out = []
        for index in range(self.nvml.nvmlDeviceGetCount()):
            try:
                out.append(self._one(index))
            except self.nvml.NVMLError as exc:
                log.warning("GPU %d skipped this round: %s", index, exc)
        return out

    def _one(self, index: int) -> GpuReading:
        nvml = self.nvml
        assert nvml is not None
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        name = nvml.nvmlDeviceGetName(handle)
        return GpuReading(
            index=index, uuid=str(nvml.nvmlDeviceGetUUID(handle)),
            name=name.decode() if isinstance(name, bytes) else str(name),
            used_mib=int(memory.used) >> 20, total_mib=int(memory.total) >> 20,
            util_pct=self._util(handle, index), processes=self._processes(handle),
        )

    def _util(self, handle: Any, index: int) -> int:
        nvml = self.nvml
        assert nvml is not None
        try:
            _, samples = nvml.nvmlDeviceGetSamples(
                handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, self.last_ts.get(index, 0))
            if samples:
                self.last_ts[index] = max(int(s.timeStamp) for s in samples)
                return max(int(s.sampleValue.uiVal) for s in samples)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) not in (NOT_SUPPORTED, NOT_FOUND):
                raise
        return int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)

    def _processes(self, handle: Any) -> tuple[tuple[int, int], ...] | None:
        nvml = self.nvml
        assert nvml is not None
        try:
            procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) != NOT_SUPPORTED:
                raise
            return None
        return tuple((int(p.pid), int(p.usedGpuMemory or 0) >> 20) for p in procs)

    def close(self) -> None:
        if self.ready and self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except self.nvml.NVMLError as exc:
                log.debug("nvmlShutdown: %s", exc)
        self.ready = self.tried = False


class IdleTracker:
    """Per GPU: since when it has been "held idle" (memory ≥ threshold, util ≤ max)."""

    def __init__(self, used_pct: float, util_max_pct: float, idle_for_s: float) -> None:
        self.used_pct = used_pct
        self.util_max = util_max_pct
        self.idle_for_s = idle_for_s
        self.since: dict[str, float] = {}

    def update(self, samples: list[GpuReading], now: float) -> list[GpuReading]:
        """The GPUs held idle for at least ``idle_for_s`` as of ``now``."""
        held = [s for s in samples if s.used_pct >= self.used_pct and s.util_pct <= self.util_max]
        keep = {s.uuid for s in held}
        self.since = {u: t for u, t in self.since.items() if u in keep}
        for s in held:
            self.since.setdefault(s.uuid, now)
        return [s for s in held if now - self.since[s.uuid] >= self.idle_for_s]


def vram_condition(idle: list[GpuReading], idle_for_s: float) -> dict[str, dict[str, Any]]:
    """One host-level condition listing every GPU held idle (empty: none)."""
    if not idle:
        return {}
    held_gib = sum(s.used_mib for s in idle) / 1024
    summary = (f"{len(idle)} GPU(s) hold {held_gib:.1f} GiB at ~0% utilisation "
               f"for over {int(idle_for_s)}s")
    return {"gpus": {"summary": summary, "gpus": [s.to_dict() for s in idle]}}
