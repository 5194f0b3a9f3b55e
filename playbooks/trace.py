"""Run the GPU probes for one host and trace every holder to what restarts it.

Two rounds of parallel channels: first everything that needs no input (the GPU
sampling window runs throughout), then what the first round named (unit details,
containers, other users' crontabs), only with validated identifiers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from bot.domain import holding, validate
from playbooks import holders as h
from playbooks import probes
from playbooks.base import Probe, Session
from playbooks.gpu import GpuStat, summarize
from playbooks.parsers import host, nvidia, ps, systemd


@dataclass(frozen=True)
class GpuPicture:
    """Everything vram_idle and vm_restart decide from."""

    stats: list[GpuStat]
    holders: list[h.Holder]
    shown: dict[str, dict[str, str]]  # unit -> systemctl show properties
    gpu_units: list[str]  # units whose names look like inference servers
    unit_files: list[systemd.UnitFileRow]
    units: list[systemd.UnitRow]
    crons: list[host.CronLine]
    containers: list[dict[str, Any]]
    clock: tuple[float, float] | None  # (now, boot) epoch seconds
    refused: list[tuple[str, str]]  # (kind, value) identifiers that failed validation
    watchdogs: dict[str, list[tuple[int, str]]]  # holder unit -> [(pid, unit)] naming it
    extra: dict[str, Any] = field(default_factory=dict)  # the caller's ``extra`` probes, parsed


def gather(session: Session, extra: Mapping[str, Probe[Any]] | None = None) -> GpuPicture:
    """The sampler first (its window is the floor of a diagnosis), then the first round,
    then the caller's ``extra`` probes that nothing here depends on: with more probes
    than SSH sessions, the ones the second round waits for get channels first."""
    samples = session.submit(probes.gpu_samples(session.options))
    first = session.submit_many(_first_round())
    later = session.submit_many(extra or {})
    got = session.parsed(first)
    procs = {p.pid: p for p in got["procs"]}
    found = (h.holders_from_apps(got["apps"], procs) or h.holders_from_devices(got["devs"], procs)
             or h.holders_from_names(procs))
    gpu_units = h.gpu_units(got["files"], got["units"])
    found = _units_by_status(session, found)
    dogs = h.watchdogs(found, procs)
    dog_units = [u for pairs in dogs.values() for _, u in pairs]
    found, shown, containers, crons, refused = _second_round(
        session, found, gpu_units + dog_units, got["cron"])
    clock = host.parse_clock("\n".join(got["clock"]))
    stats = summarize(nvidia.samples_of(samples.result()[1]))
    return GpuPicture(stats, found, shown, gpu_units, got["files"], got["units"], crons,
                      containers, clock, refused, dogs, session.parsed(later))


def _first_round() -> dict[str, Probe[Any]]:
    return {"apps": probes.compute_apps(), "procs": probes.processes(), "clock": probes.clock(),
            "devs": probes.gpu_device_users(), "files": probes.unit_files(),
            "units": probes.units(), "cron": probes.crontab()}


def _second_round(session: Session, found: list[h.Holder], units: list[str],
                  crons: list[host.CronLine]) -> tuple[list[h.Holder], dict[str, dict[str, str]],
                                                       list[dict[str, Any]], list[host.CronLine],
                                                       list[tuple[str, str]]]:
    refused: list[tuple[str, str]] = []
    pending: dict[str, Future[Any]] = {}
    names = h.units_to_show(found, units)
    if names:
        pending["show"] = session.submit(probes.show_units(names))
    box_ids = _valid_box_ids(found, refused)
    if box_ids:
        pending["docker"] = session.submit(probes.docker_inspect(box_ids))
    elif not found:  # no process visible: a running container given GPUs may hold them
        pending["docker"] = session.submit(probes.docker_inspect())
    for user in _other_users(found, refused):
        pending[f"cron:{user}"] = session.submit(probes.crontab(user))
    results = {k: f.result()[1] for k, f in pending.items()}
    shown = {b.get("Id", ""): b for b in results.get("show", []) if b.get("Id")}
    all_crons = crons + [line for k, v in results.items() if k.startswith("cron:") for line in v]
    containers = results.get("docker", [])
    bad = sorted({x.cgroup_unit for x in found if x.cgroup_unit and not h.safe_unit(x.cgroup_unit)})
    refused += [("unit", u) for u in bad]
    traced = [replace(x, restarter=h.restarter_for(x, shown, containers, all_crons)) for x in found]
    return traced or h.hidden_holders(shown, containers), shown, containers, all_crons, refused


def _units_by_status(session: Session, found: list[h.Holder]) -> list[h.Holder]:
    """Holders whose cgroup named no unit: ask ``systemctl status PID`` (validated PID)."""
    unknown = [x for x in found if not x.cgroup_unit and validate.is_valid(validate.pid, x.pid)]
    futures = [(x, session.submit(probes.unit_of_pid(str(x.pid)))) for x in unknown]
    named = {x.pid: f.result()[1] for x, f in futures}
    return [replace(x, cgroup_unit=named.get(x.pid) or x.cgroup_unit) for x in found]


def _valid_box_ids(found: list[h.Holder], refused: list[tuple[str, str]]) -> list[str]:
    ids = []
    for x in found:
        box = systemd.docker_id_from_scope(x.cgroup_unit or "")
        if box and validate.is_valid(validate.container_id, box):
            ids.append(box)
        elif box:
            refused.append(("container", box))
    return sorted(set(ids))


USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def _other_users(found: list[h.Holder], refused: list[tuple[str, str]]) -> list[str]:
    users: list[str] = []
    for x in found:
        if not x.user or x.user == "root" or x.user in users:
            continue
        if USER_RE.fullmatch(x.user):
            users.append(x.user)
        else:
            refused.append(("user", x.user))
    return users


def started_after_boot(holder: h.Holder, clock: tuple[float, float] | None) -> float | None:
    """Seconds between boot and the holder's start (None if unknown)."""
    if clock is None or holder.elapsed_s is None:
        return None
    now, boot = clock
    return max(now - holder.elapsed_s - boot, 0.0)


def server_label(holder: h.Holder) -> str:
    """'vLLM, --gpu-memory-utilization 0.95' for a server, else its command line, short
    ('python3 sweep.py --lr 3e-4'): what a person recognises, never just 'process'."""
    if not holder.kind:
        return holding.short_command(holder.args) or "?"
    parts = [holder.kind, *ps.notable_flags(holder.args, limit=1)]
    return ", ".join(p for p in parts if p)
