"""Host-level tools: ``journalctl --list-boots``, a boot's last lines, ``uptime``, ``free -b``,
``crontab -l``, ``docker inspect`` and ``dmesg``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.domain.host_state import UnitState
from playbooks.parsers.common import first_line, integer, lines, number

_BOOT = re.compile(r"^\s*(-?\d+)\s+([0-9a-f]{32})\b(.*)$")
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_LOAD = re.compile(r"load averages?:\s*([\d.]+),?\s+([\d.]+),?\s+([\d.]+)")
_UP_SINCE = re.compile(r"^\s*(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
# Lines that only a clean shutdown writes at the end of a boot's journal.
CLEAN_MARKERS = ("Journal stopped", "systemd-shutdown", "Reached target System Reboot",
                 "Reached target System Power Off", "Reached target reboot.target",
                 "Reached target poweroff.target", "Reached target Shutdown",
                 "System is rebooting", "System is powering down", "Shutting down.")


@dataclass(frozen=True)
class Boot:
    index: int
    boot_id: str
    first: datetime | None
    last: datetime | None


@dataclass(frozen=True)
class Memory:
    total: int | None
    used: int | None
    available: int | None


@dataclass(frozen=True)
class CronLine:
    user: str
    schedule: str
    command: str


def _stamp(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None


def parse_list_boots(text: str) -> list[Boot]:
    """Both layouts (with or without the ``IDX BOOT ID`` header, ``—`` or space between
    first and last entry). Times are naive: only differences between them are used."""
    boots = []
    for line in lines(text):
        m = _BOOT.match(line)
        if not m:
            continue
        stamps = [_stamp(s) for s in _STAMP.findall(m[3])]
        boots.append(Boot(int(m[1]), m[2], stamps[0] if stamps else None,
                          stamps[1] if len(stamps) > 1 else None))
    return sorted(boots, key=lambda b: b.index)


def ended_cleanly(last_lines: str) -> bool:
    """Did a boot's journal end with a shutdown? (no marker: it crashed or lost power)."""
    tail = lines(last_lines)[-15:]
    return any(marker in line for line in tail for marker in CLEAN_MARKERS)


def parse_uptime_since(text: str) -> datetime | None:
    """``uptime -s``: ``2024-01-15 10:20:01``."""
    m = _UP_SINCE.match(text.strip().splitlines()[0] if text.strip() else "")
    return _stamp(m[1]) if m else None


def parse_load(text: str) -> tuple[float, float, float] | None:
    m = _LOAD.search(text)
    if not m:
        return None
    values = [number(v) for v in m.groups()]
    if any(v is None for v in values):
        return None
    return (values[0] or 0.0, values[1] or 0.0, values[2] or 0.0)


def parse_free(text: str) -> Memory | None:
    """``free`` in any procps format, columns found by the header's names.

    procps-ng >= 3.3.10: ``total used free shared buff/cache available``; ``-w`` splits
    ``buffers``/``cache``. Older procps has no ``available``: its ``-/+ buffers/cache`` row
    holds the used and free figures without the page cache, which is what is available.
    """
    rows = lines(text)
    header = next((r.split() for r in rows if "total" in r.split()), [])
    mem = next((r.split() for r in rows if r.split()[:1] == ["Mem:"]), None)
    if mem is None or len(mem) < 3:
        return None
    cells = dict(zip(header, mem[1:], strict=False)) if header else {}
    total = integer(cells.get("total", mem[1]))
    if "available" in cells:
        return Memory(total, integer(cells.get("used", mem[2])), integer(cells["available"]))
    minus = next((r.split(":", 1)[1].split() for r in rows if r.startswith("-/+ buffers")), None)
    if minus and len(minus) >= 2:
        return Memory(total, integer(minus[0]), integer(minus[1]))
    return Memory(total, integer(mem[2]), None)


def parse_crontab(text: str, user: str = "root") -> list[CronLine]:
    """Active crontab lines (comments, blanks and variable settings skipped)."""
    out = []
    for line in lines(text):
        s = line.strip()
        if s.startswith("#") or re.match(r"^[A-Za-z_][A-Za-z0-9_]*\s*=", s):
            continue
        if s.startswith("@"):
            sched, _, cmd = s.partition(" ")
        else:
            cells = s.split(None, 5)
            if len(cells) < 6:
                continue
            sched, cmd = " ".join(cells[:5]), cells[5]
        out.append(CronLine(user, sched, cmd.strip()))
    return out


def parse_docker_inspect(text: str) -> list[dict[str, Any]]:
    """``docker inspect`` JSON -> [{id, name, image, restart_policy, running, pid}]."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    return [c for c in (_container(item) for item in data) if c is not None]


DOCKER_RESTARTS = frozenset({"always", "unless-stopped", "on-failure"})


def container_owner(scope: str, container: str, text: str) -> UnitState | None:
    """``docker inspect --format '{{.HostConfig.RestartPolicy.Name}}' ID`` as the owner of
    the container's processes: docker restarts at once (100 ms the first time). None when
    docker printed no policy."""
    policy = first_line(text)
    if not policy:
        return None
    return UnitState(name=scope, load_state="loaded", active_state="active",
                     restart=policy if policy in DOCKER_RESTARTS else "no", restart_s=0.1,
                     fragment_path=f"docker:{container}")


def _container(item: object) -> dict[str, Any] | None:
    if not isinstance(item, dict):
        return None
    host, state, config = _obj(item, "HostConfig"), _obj(item, "State"), _obj(item, "Config")
    policy = _obj(host, "RestartPolicy")
    return {
        "id": str(item.get("Id", "")), "name": str(item.get("Name", "")).lstrip("/"),
        "image": str(config.get("Image", "")), "restart_policy": str(policy.get("Name", "")),
        "running": state.get("Running") is True, "pid": integer(str(state.get("Pid", ""))),
        "gpus": _given_gpus(host),
    }


def _given_gpus(host_config: dict[str, Any]) -> bool:
    """``docker run --gpus`` (a device request for the ``gpu`` capability), the nvidia
    runtime, or /dev/nvidia* passed as devices."""
    requests = host_config.get("DeviceRequests")
    for req in requests if isinstance(requests, list) else []:
        caps = req.get("Capabilities") if isinstance(req, dict) else None
        if isinstance(caps, list) and any(isinstance(c, list) and "gpu" in c for c in caps):
            return True
    devices = host_config.get("Devices")
    if any(isinstance(d, dict) and str(d.get("PathOnHost", "")).startswith("/dev/nvidia")
           for d in (devices if isinstance(devices, list) else [])):
        return True
    return host_config.get("Runtime") == "nvidia"


def _obj(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def tail(text: str, n: int = 20) -> list[str]:
    return lines(text)[-n:]


_ZONE = re.compile(r"^([+-])(\d\d)(\d\d)$")


def parse_clock(text: str) -> tuple[float, float] | None:
    """``date '+%s %z'; uptime -s`` -> (now, boot time) as epoch seconds."""
    rows = lines(text)
    if len(rows) < 2:
        return None
    head = rows[0].split()
    now = number(head[0]) if head else None
    zone = _ZONE.match(head[1]) if len(head) > 1 else None
    boot = parse_uptime_since(rows[1])
    if now is None or boot is None:
        return None
    offset = 0
    if zone:
        offset = (int(zone[2]) * 3600 + int(zone[3]) * 60) * (1 if zone[1] == "+" else -1)
    boot_epoch = (boot - datetime(1970, 1, 1)).total_seconds() - offset
    return now, boot_epoch
