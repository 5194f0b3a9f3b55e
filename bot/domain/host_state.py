"""The before-state an action captures: units, processes, per-GPU memory, journal size.

Pure data. It is what Revert restores and what verification compares against, and it
is stored as JSON in the action result, so it must survive a restart of the bot.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bot.domain.slurm import SlurmJob, SlurmNode


@dataclass(frozen=True)
class UnitState:
    name: str
    load_state: str = ""
    active_state: str = ""  # active | inactive | failed | activating | deactivating
    sub_state: str = ""
    unit_file_state: str = ""  # enabled | disabled | masked | static | ...
    main_pid: int = 0
    restart: str = ""
    fragment_path: str = ""
    pids: tuple[int, ...] = ()  # every process in the unit's cgroup
    restart_s: float = 0.0  # RestartUSec: how long systemd waits before restarting it
    n_restarts: int = 0
    timeout_stop_s: float = 90.0  # TimeoutStopUSec: SIGTERM → SIGKILL on stop

    @property
    def restarts(self) -> bool:
        """systemd starts it again by itself after its process dies."""
        return self.restart not in ("", "no")

    @property
    def file_in_etc(self) -> bool:
        """Its own file lives in /etc: ``systemctl mask`` cannot put a link there."""
        return self.fragment_path.startswith("/etc/")

    @property
    def exists(self) -> bool:
        return self.load_state not in ("", "not-found")

    @property
    def running(self) -> bool:
        return self.active_state in ("active", "activating", "deactivating", "reloading")

    @property
    def enabled(self) -> bool:
        return self.unit_file_state.startswith("enabled")

    @property
    def masked(self) -> bool:
        return self.unit_file_state.startswith("masked")


@dataclass(frozen=True)
class GpuState:
    index: int
    uuid: str
    memory_used_mib: float
    memory_total_mib: float


@dataclass(frozen=True)
class GpuHolder:
    """A process holding GPU memory, and the unit it runs under (from its cgroup)."""

    pid: int
    gpu_uuid: str
    used_mib: float
    unit: str | None = None


@dataclass(frozen=True)
class ProcState:
    pid: int
    alive: bool
    unit: str | None = None
    command: str = ""  # evidence only: never put on a command line


@dataclass(frozen=True)
class SlurmCapture:
    """A Slurm node as the controller saw it, and the jobs still on it."""

    node: SlurmNode
    jobs: tuple[SlurmJob, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SlurmCapture:
        node = dict(data["node"])
        return cls(SlurmNode(**{**node, "flags": tuple(node.get("flags") or ())}),
                   tuple(SlurmJob(**j) for j in data.get("jobs") or ()))


@dataclass(frozen=True)
class CapturedState:
    kind: str
    params: dict[str, str]
    host: str
    captured_at: float
    units: tuple[UnitState, ...] = ()
    gpus: tuple[GpuState, ...] = ()
    holders: tuple[GpuHolder, ...] = ()
    processes: tuple[ProcState, ...] = ()
    journal_bytes: int | None = None
    errors: tuple[str, ...] = field(default_factory=tuple)
    owners: tuple[UnitState, ...] = ()  # the units the processes run under (restart policy)
    disk_avail: dict[str, int] = field(default_factory=dict)  # mount → bytes available
    slurm: SlurmCapture | None = None  # slurm.* actions: the node before

    def owner(self, name: str | None) -> UnitState | None:
        return next((u for u in self.owners if u.name == name), None)

    def unit(self, name: str) -> UnitState | None:
        return next((u for u in self.units if u.name == name), None)

    def process(self, pid: int) -> ProcState | None:
        return next((p for p in self.processes if p.pid == pid), None)

    def affected_gpus(self, pids: set[int], free_mib: float) -> tuple[int, ...]:
        """GPUs the action should free: those held by ``pids``.

        When the driver hides PIDs (containers) no holder is listed; then every GPU
        with memory in use counts, which is what the operator would check by hand.
        """
        uuids = {h.gpu_uuid for h in self.holders if h.pid in pids}
        if uuids:
            return tuple(g.index for g in self.gpus if g.uuid in uuids)
        if self.holders or not pids:
            return ()
        return tuple(g.index for g in self.gpus if g.memory_used_mib >= free_mib)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CapturedState:
        return cls(
            kind=data["kind"], params=dict(data["params"]), host=data["host"],
            captured_at=float(data["captured_at"]),
            units=tuple(UnitState(**{**u, "pids": tuple(u.get("pids") or ())})
                        for u in data.get("units") or ()),
            gpus=tuple(GpuState(**g) for g in data.get("gpus") or ()),
            holders=tuple(GpuHolder(**h) for h in data.get("holders") or ()),
            processes=tuple(ProcState(**p) for p in data.get("processes") or ()),
            journal_bytes=data.get("journal_bytes"),
            errors=tuple(data.get("errors") or ()),
            owners=tuple(UnitState(**{**u, "pids": tuple(u.get("pids") or ())})
                         for u in data.get("owners") or ()),
            disk_avail={str(k): int(v) for k, v in (data.get("disk_avail") or {}).items()},
            slurm=SlurmCapture.from_dict(data["slurm"]) if data.get("slurm") else None,
        )
