"""Who keeps a GPU's device files open, and what a reset must stop around itself. Pure,
plus the one probe it needs beyond the GPU view's (container names).

NVIDIA's reset refuses while anything holds ``/dev/nvidia*`` ("In use by another client";
NVSentinel#1690: persistence mode). Beside compute processes (which a reset never
touches: they are the operator's work) these are daemons: nvidia-persistenced, DCGM's
nv-hostengine, dcgm-exporter (a unit, or a Docker container on most GPU clusters), other
monitors, and Fabric Manager. A client that runs under a systemd unit or in a container
can be stopped and started again around the reset; a bare process cannot, and blocks.

Fabric Manager is stopped only where the reset needs it: on an NVSwitch host before
Hopper no GPU can be reset alone (NVIDIA's Fabric Manager user guide, "GPU reset": the
GPUs and NVSwitches of the baseboard are reset together with Fabric Manager stopped), so
the proposal is to reset every GPU; on Hopper and later one GPU is reset while Fabric
Manager keeps running.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bot.domain import validate
from playbooks.base import Probe
from playbooks.parsers.common import lines
from playbooks.parsers.nvidia_xml import GpuHealth
from playbooks.parsers.systemd import docker_id_from_scope

DOCKER_NAMES_COMMAND = "docker ps --no-trunc --format '{{.ID}} {{.Names}}' 2>/dev/null"
FABRIC_MANAGER = "nvidia-fabricmanager.service"
PERSISTENCED = "nvidia-persistenced.service"
RELEASE_SEP = "|"  # not in the unit or container grammar: joins a reset's release list
CONTAINER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# NVSwitch baseboards whose GPUs reset only together (before Hopper): A100/A800 HGX, V100 DGX-2
PRE_HOPPER = re.compile(r"\b(A100|A800|V100|V100S)\b")
FM_PRESENT = ("active", "activating", "deactivating", "failed", "reloading")


def docker_names() -> Probe[dict[str, str]]:
    """Container id -> name (a host without docker prints nothing)."""
    return Probe("containers_running", DOCKER_NAMES_COMMAND, parse_docker_names)


def parse_docker_names(text: str) -> dict[str, str]:
    out = {}
    for line in lines(text):
        cells = line.split()
        if len(cells) == 2 and re.fullmatch(r"[0-9a-f]{12,64}", cells[0]):
            out[cells[0]] = cells[1]
    return out


@dataclass(frozen=True)
class DeviceClient:
    pid: int
    comm: str = ""
    unit: str | None = None  # the systemd unit its cgroup names (not a container scope)
    container: str | None = None  # the container's name, when it runs in one

    @property
    def subject(self) -> str | None:
        """``container:dcgm-exporter`` or ``unit:nvidia-persistenced.service``: what a
        reset stops and starts again; None: a bare process that nothing can restart."""
        if self.container and CONTAINER_RE.match(self.container):
            return f"container:{self.container}"
        if self.unit and self.unit.endswith(".service") \
                and validate.is_valid(validate.unit_name, self.unit):
            return f"unit:{self.unit}"
        return None

    @property
    def words(self) -> str:
        """``dcgm-exporter (container)``, ``nvidia-persistenced.service``, ``pid 77 (top)``."""
        if self.container:
            return f"{self.container} (container)"
        if self.subject:
            return str(self.unit)
        return f"pid {self.pid} ({self.comm or '?'})"


def clients(pids: Iterable[int], states: Mapping[int, tuple[str, str]],
            units: Mapping[int, str | None], containers: Mapping[str, str]) -> list[DeviceClient]:
    """Every live PID holding /dev/nvidia*, with its unit or container."""
    out = []
    for pid in sorted(set(pids)):
        if pid not in states:
            continue  # gone since lsof listed it
        unit = units.get(pid)
        cid = docker_id_from_scope(unit) if unit else None
        name = next((n for c, n in containers.items() if cid and (c.startswith(cid)
                                                                   or cid.startswith(c))), None)
        out.append(DeviceClient(pid, states[pid][1], None if cid else unit,
                                name or (cid[:12] if cid else None)))
    return out


def pre_hopper_nvswitch(gpus: Sequence[GpuHealth], fabric_manager: str) -> bool:
    """An NVSwitch baseboard whose GPUs cannot be reset alone (Fabric Manager installed and
    GPUs of a generation before Hopper)."""
    return fabric_manager.strip() in FM_PRESENT and any(PRE_HOPPER.search(g.name) for g in gpus)


def _rank(subject: str) -> int:
    """Stop order: containers and monitors first, Fabric Manager, persistenced last."""
    if subject == f"unit:{PERSISTENCED}":
        return 3
    if subject == f"unit:{FABRIC_MANAGER}":
        return 2
    return 0 if subject.startswith("container:") else 1


@dataclass(frozen=True)
class ReleasePlan:
    """What a reset stops around itself (in stop order), and who blocks it."""

    release: tuple[str, ...]
    blocking: tuple[DeviceClient, ...]
    named: tuple[DeviceClient, ...]

    @property
    def param(self) -> str:
        return RELEASE_SEP.join(self.release)


def release_plan(found: Sequence[DeviceClient], *, all_gpus: bool,
                 compute: Iterable[int] = ()) -> ReleasePlan:
    """Every client of the device files that is not a compute process: a unit or container
    is released (Fabric Manager only for an all-GPU reset), a bare process blocks."""
    busy = set(compute)
    release: list[str] = []
    named: list[DeviceClient] = []
    blocking: list[DeviceClient] = []
    for c in found:
        if c.pid in busy:
            continue
        subject = c.subject
        if subject is None:
            blocking.append(c)
        elif subject == f"unit:{FABRIC_MANAGER}" and not all_gpus:
            continue  # one GPU's reset on Hopper and later: Fabric Manager keeps running
        elif subject not in release:
            release.append(subject)
            named.append(c)
    order = sorted(range(len(release)), key=lambda i: (_rank(release[i]), i))
    return ReleasePlan(tuple(release[i] for i in order), tuple(blocking),
                       tuple(named[i] for i in order))


def parse_release(value: str) -> list[tuple[str, str]]:
    """``container:a|unit:b.service`` -> [("container", "a"), ("unit", "b.service")]."""
    out = []
    for part in filter(None, value.split(RELEASE_SEP)):
        kind, _, name = part.partition(":")
        out.append((kind, name))
    return out
