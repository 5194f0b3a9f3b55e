"""Freeze a validated scenario into the JSON state the stdlib-only tools read and mutate.

Scenario times are relative to boot; here they become epoch seconds around ``now`` so a
host always looks freshly booted when it starts.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bot.core.errors import UserError
from bot.sim.defaults import BASE_PROCESSES, BASE_UNITS, BUS_IDS
from bot.sim.scenario import (
    ContainerSpec,
    FilesystemSpec,
    ProcessSpec,
    Scenario,
    UnitSpec,
    parse_size,
)


def _gpu_map(spec: int | list[int] | dict[int, int], n_gpus: int) -> dict[str, int]:
    if isinstance(spec, int):
        return {str(i): spec for i in range(n_gpus)} if spec else {}
    if isinstance(spec, list):
        return {str(i): m for i, m in enumerate(spec) if m}
    return {str(i): m for i, m in spec.items() if m}


def _gpus(sc: Scenario) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for spec in sc.gpus:
        for _ in range(spec.count):
            i = len(out)
            gpu = spec.model_dump(exclude={"count"})
            gpu["index"] = i
            derived = f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{sc.host}/gpu/{i}')}"
            gpu["uuid"] = spec.uuid if spec.count == 1 and spec.uuid else derived
            gpu["bus_id"] = (spec.bus_id if spec.count == 1 and spec.bus_id
                             else f"00000000:{BUS_IDS[i % len(BUS_IDS)]}:00.0")
            out.append(gpu)
    return out


def _process(p: dict[str, Any], boot_time: float, n_gpus: int) -> dict[str, Any]:
    args = p["args"]
    argv0 = args.split(" ", 1)[0] if args else "?"
    return {
        "pid": p["pid"], "ppid": p["ppid"], "user": p["user"], "args": args,
        "comm": (p.get("comm") or argv0.rsplit("/", 1)[-1])[:15],
        "start": boot_time + p["started_s_after_boot"], "rss_kib": p["rss_kib"],
        "vsz_kib": p["vsz_kib"], "pcpu": p["pcpu"], "pmem": p["pmem"], "stat": p["stat"],
        "gpu_memory_mib": _gpu_map(p["gpu_memory_mib"], n_gpus), "owner": dict(p["owner"]),
        "ignores": list(p.get("ignores") or []), "leaks_gpu_memory": p.get("leaks_gpu_memory"),
        "holds_devices": bool(p.get("holds_devices")),
        "hidden": bool(p.get("hidden")),
    }


def _unit(name: str, u: UnitSpec, boot_time: float, n_gpus: int) -> dict[str, Any]:
    d = u.model_dump()
    d["name"] = name
    d["fragment_path"] = u.fragment_path or f"/etc/systemd/system/{name}"
    d["sub_state"] = u.sub_state or {"active": "running", "inactive": "dead",
                                     "failed": "failed"}[u.active_state]
    d["active_enter"] = boot_time + u.active_enter_s_after_boot if u.active_state == "active" else 0
    d["gpu_memory_mib"] = _gpu_map(u.gpu_memory_mib, n_gpus)
    d["template"] = None
    del d["active_enter_s_after_boot"]
    return d


def _boots(sc: Scenario, boot_time: float) -> list[dict[str, Any]]:
    boots, end_next = [], boot_time
    for i, prev in enumerate(sc.boot.previous):
        end = end_next - prev.gap_s
        start = end - prev.duration_s
        boots.append({"index": -(i + 1), "id": prev.id or uuid.uuid5(
            uuid.NAMESPACE_DNS, f"{sc.host}/boot/{i + 1}").hex, "start": start, "end": end,
            "clean": prev.clean, "last_lines": prev.last_lines})
        end_next = start
    return boots


def build_state(sc: Scenario, now: float | None = None) -> dict[str, Any]:
    """Freeze a validated scenario into the JSON state the tools read and mutate."""
    now = time.time() if now is None else now
    boot_time = now - sc.boot.uptime_s
    gpus = _gpus(sc)
    base_procs = ([ProcessSpec.model_validate(p) for p in BASE_PROCESSES]
                  if sc.base_processes else [])
    base_units = {n: UnitSpec.model_validate(u) for n, u in BASE_UNITS.items()}
    procs = [_process(p.model_dump(), boot_time, len(gpus)) for p in [*base_procs, *sc.processes]]
    units = {**(base_units if sc.base_processes else {}), **sc.units}
    state: dict[str, Any] = {
        "host": sc.host, "kernel": sc.kernel, "systemd": sc.systemd,
        "nvidia": sc.nvidia.model_dump(), "gpus": gpus, "processes": procs,
        "units": {n: _unit(n, u, boot_time, len(gpus)) for n, u in units.items()},
        "crontabs": sc.crontabs,
        "filesystems": [_fs(f) for f in sc.filesystems],
        "dirs": {k.rstrip("/") or "/": parse_size(v) for k, v in sc.dirs.items()},
        "deleted_files": [{**d.model_dump(), "size": parse_size(d.size)} for d in sc.deleted_files],
        "containers": [_container(c, boot_time) for c in sc.containers],
        "sudo_denied": list(sc.sudo_denied),
        "sudo_refuses": sc.sudo_refuses,
        "files": [{**f.model_dump(), "size": parse_size(f.size)} for f in sc.files],
        "boot": {"id": sc.boot.id or uuid.uuid5(uuid.NAMESPACE_DNS, f"{sc.host}/boot/0").hex,
                 "time": boot_time, "previous": _boots(sc, boot_time)},
        "journal": {"usage": parse_size(sc.journal.disk_usage), "path": sc.journal.path,
                    "lines": sc.journal.lines},
        "dmesg": sc.dmesg,
        "infiniband": [i.model_dump() for i in sc.infiniband],
        "dcgm": sc.dcgm.model_dump(), "smoke": sc.smoke.model_dump(),
        "memory": {"total": parse_size(sc.memory_total), "used": parse_size(sc.memory_used)},
        "commands": {line: c.model_dump() for line, c in sc.commands.items()},
        "pending": [],
        "next_pid": max([p["pid"] for p in procs] + [1000]) + 1,
    }
    for unit in state["units"].values():
        procs_of = [p for p in procs if p["owner"] == {"kind": "systemd", "name": unit["name"]}]
        running = procs_of and unit["active_state"] == "active"
        unit["main_pid"] = procs_of[0]["pid"] if running else 0
        if procs_of:
            unit["template"] = {k: v for k, v in procs_of[0].items() if k not in ("pid", "start")}
    return state


def _fs(f: FilesystemSpec) -> dict[str, Any]:
    d = f.model_dump()
    d["size"], d["used"] = parse_size(f.size), parse_size(f.used)
    if d["used"] > d["size"]:
        raise UserError(f"filesystem {f.mount}: used is larger than size", 2)
    return d


def _container(c: ContainerSpec, boot_time: float) -> dict[str, Any]:
    d = c.model_dump()
    d["created"] = boot_time - c.created_s_before_boot
    d["started"] = boot_time + 20
    return d
