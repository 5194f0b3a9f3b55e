"""vram_idle: GPU memory held at (near) zero utilization, who holds it, what restarts it.

Proposals: ``systemd.stop_disable`` (``systemd.mask`` as the stronger alternative) for
a unit that runs the holder; ``process.terminate`` for a holder nothing restarts;
nothing for a holder that is working, for disabled inactive units, or for anything
whose identifiers fail the grammar (shown as evidence and refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core import strings as S
from bot.domain import holding, validate
from bot.domain.findings import Severity
from bot.remediation.actions.process import Terminate
from bot.remediation.actions.systemd import Mask, StopDisable
from playbooks import holders as h
from playbooks.base import PlaybookOptions, Report, Session
from playbooks.gpu import GpuStat, gb
from playbooks.text import duration
from playbooks.text import plural as _s
from playbooks.trace import GpuPicture, gather, server_label, started_after_boot

NAME = "vram_idle"
DESCRIPTION = "GPU memory held at low utilization: holder processes and what restarts them"
RESTARTING_POLICIES = ("always", "unless-stopped", "on-failure")


def run(session: Session, context: Mapping[str, Any]) -> Report:
    report = Report(session.target.name)
    assess(gather(session), session.options, report)
    return report


def assess(p: GpuPicture, opts: PlaybookOptions, report: Report) -> None:
    """All vram_idle rules over one ``GpuPicture`` (pure; vm_restart reuses it)."""
    for kind, value in p.refused:
        _refuse(report, kind, value)
    if not p.stats:
        report.find("gpu.no_data", Severity.WARNING, S.DIAG_NO_GPU_DATA)
        return
    held = [s for s in p.stats if s.held(opts.held_mib)]
    if not held:
        report.find("gpu.free", Severity.INFO, S.DIAG_GPUS_FREE.format(
            n=len(p.stats), s=_s(len(p.stats)), held=gb(opts.held_mib)),
            gpus=_gpu_evidence(p.stats))
    else:
        _assess_holders(p, held, opts, report)
    _other_units(p, report)


def _assess_holders(p: GpuPicture, held: list[GpuStat], opts: PlaybookOptions,
                    report: Report) -> None:
    groups: dict[h.Restarter, list[h.Holder]] = {}
    for holder in sorted(p.holders, key=_held_by, reverse=True):
        groups.setdefault(holder.restarter, []).append(holder)
    # the biggest holder first: the first proposal frees the memory the headline names
    groups = dict(sorted(groups.items(), key=lambda kv: -sum(map(_held_by, kv[1]))))
    if not groups:
        idle = [s for s in held if s.idle(opts.idle_util_pct)]
        if idle:
            report.find("gpu.idle_vram_held", Severity.CRITICAL, S.DIAG_IDLE_HELD_UNNAMED.format(
                n=len(idle), s=_s(len(idle)), verb=_holds(len(idle)),
                mem=_mem([g.memory_used_mib or 0 for g in idle]),
                util=_util(idle)),
                gpus=_gpu_evidence(idle))
        return
    for restarter, members in groups.items():
        gpus = _gpus_of(members, held)
        if not all(g.idle(opts.idle_util_pct) for g in gpus):
            report.find("gpu.busy_holder", Severity.INFO, S.DIAG_BUSY_HOLDER.format(
                who=_who(members), n=len(gpus), s=_s(len(gpus)), util=_util(gpus)),
                gpus=_gpu_evidence(gpus, members),
                holders=[_holder_evidence(x, p) for x in members])
            continue
        _idle_group(p, restarter, members, gpus, opts, report)


def _holds(n: int) -> str:
    return "holds" if n == 1 else "hold"


def _held_by(x: h.Holder) -> int:
    return x.used_mib or 0


def _idle_group(p: GpuPicture, restarter: h.Restarter, members: list[h.Holder],
                gpus: list[GpuStat], opts: PlaybookOptions, report: Report) -> None:
    """One finding per holder group, in its own memory: a 2 GiB sweep beside a 75.8 GiB
    server on GPU 0 holds 2.0 GiB, not the GPU's 77.8 GiB."""
    held = holding.held_for(_holder_evidence(members[0], p)) or S.DIAG_HELD_FOR_UNKNOWN
    own = [_own(g, members) for g in gpus]
    n, util = len(gpus), _util(gpus)
    if members[0].hidden:  # named by what runs it: its unit or container
        title = S.DIAG_IDLE_HELD_HIDDEN.format(
            n=n, s=_s(n), verb=_holds(n), mem=_mem(own), util=util, held=held,
            what=restarter.describe(), runs=server_label(members[0]))
    else:
        title = S.DIAG_IDLE_HELD_FOR.format(
            n=n, s=_s(n), verb=_holds(n), mem=_mem(own), util=util, held=held,
            who=_who(members), started=_started(members[0], p, opts),
            restarter=restarter.describe())
    report.find("gpu.idle_vram_held", Severity.CRITICAL, title,
                gpus=_gpu_evidence(gpus, members),
                holders=[_holder_evidence(x, p) for x in members], restarter=vars(restarter))
    _propose(restarter, members, gb(sum(own)), p, report)


def _own(g: GpuStat, members: list[h.Holder]) -> int:
    """The group's own memory on ``g``; the GPU's whole use where nvidia-smi could not map
    a member to it (a container's holder found through /dev/nvidia*)."""
    mine = [x.on(g.uuid) for x in members]
    if mine and all(m is not None for m in mine):
        return sum(m or 0 for m in mine)
    return g.memory_used_mib or 0


def maskable(fragment_path: str) -> bool:
    """``systemctl mask`` refuses a unit whose file lives in /etc/systemd/system ("File …
    already exists"): offering it there would only produce a failed action."""
    return not fragment_path.startswith("/etc/systemd/system/")


def _propose(r: h.Restarter, members: list[h.Holder], mem: str, p: GpuPicture,
             report: Report) -> None:
    in_jobs = [x for x in members if x.slurm_job]
    if in_jobs:  # its unit is slurmd's or slurmstepd's: stopping either would hit every job
        for x in in_jobs:
            report.find("slurm.job_holder", Severity.WARNING, S.SLURM_JOB_HOLDER.format(
                pid=x.pid, job=x.slurm_job, user=x.user or "unknown", mem=gb(x.used_mib)),
                pid=x.pid, job=x.slurm_job, user=x.user, unit=x.cgroup_unit)
        return
    if r.kind == "systemd":
        unit = h.safe_unit(r.name)
        if unit is None:
            _refuse(report, "unit", r.name)
            return
        _watchdogs(unit, p, report)
        report.propose(StopDisable.kind, {"unit": unit},
                       S.DIAG_STOP_DISABLE_REASON.format(unit=unit, mem=mem),
                       S.DIAG_STOP_DISABLE_RISK)
        if maskable(r.detail):
            report.propose(Mask.kind, {"unit": unit}, S.DIAG_MASK_REASON.format(unit=unit),
                           S.DIAG_MASK_RISK.format(unit=unit))
        return
    if r.kind == "docker" and r.restart in RESTARTING_POLICIES:
        report.find("docker.restart_policy", Severity.WARNING, S.DIAG_DOCKER_RESTARTS.format(
            name=r.name, policy=r.restart, pid=members[0].pid), container=vars(r))
        return
    if r.kind == "cron":
        report.find("cron.reboot", Severity.WARNING,
                    S.DIAG_CRON_AT_BOOT.format(line=r.detail, user=r.name), cron=vars(r))
    for x in members:
        if not x.hidden:  # a PID this login cannot see is never signalled
            _terminate(x, report)


def _watchdogs(unit: str, p: GpuPicture, report: Report) -> None:
    """A service that names ``unit`` on its command line may start it again: stop it first."""
    for pid, dog in p.watchdogs.get(unit, []):
        safe = h.safe_unit(dog)
        props = p.shown.get(dog, {})
        report.find("systemd.watchdog", Severity.WARNING, S.DIAG_WATCHDOG.format(
            dog=dog, pid=pid, unit=unit), unit=dog, pid=pid, properties=props)
        if safe is None:
            _refuse(report, "unit", dog)
        elif props.get("ActiveState", "active") == "active" or \
                props.get("UnitFileState") == "enabled":
            report.propose(StopDisable.kind, {"unit": safe},
                           S.DIAG_WATCHDOG_REASON.format(dog=safe, unit=unit),
                           S.DIAG_STOP_DISABLE_RISK)


def _terminate(x: h.Holder, report: Report) -> None:
    try:
        pid = validate.pid(x.pid)
    except validate.InvalidIdentifier as exc:
        _refuse(report, "pid", x.pid, exc.reason)
        return
    report.propose(Terminate.kind, {"pid": pid}, S.DIAG_TERMINATE_REASON.format(
        pid=pid, label=server_label(x), mem=gb(x.used_mib)), S.DIAG_TERMINATE_RISK)


def _refuse(report: Report, kind: str, value: object, reason: str = "") -> None:
    why = reason or _reason(kind, value)
    report.find("validate.refused", Severity.WARNING,
                S.DIAG_REFUSED.format(kind=kind, value=repr(str(value))[:80], reason=why),
                kind=kind, value=str(value)[:500])


def _reason(kind: str, value: object) -> str:
    checks = {"unit": validate.unit_name, "pid": validate.pid, "container": validate.container_id}
    try:
        checks.get(kind, validate.unit_name)(value)
    except validate.InvalidIdentifier as exc:
        return exc.reason
    return "not accepted"


def _other_units(p: GpuPicture, report: Report) -> None:
    """GPU-looking units that are disabled and inactive: named, nothing proposed."""
    running = {x.restarter.name for x in p.holders}
    quiet = [u for u in p.gpu_units if u not in running and _disabled_inactive(p, u)]
    if quiet:
        report.find("gpu.units_disabled", Severity.INFO, S.DIAG_OTHER_GPU_UNITS.format(
            n=len(quiet), s=_s(len(quiet)), names=", ".join(quiet)[:300]), units=quiet)


def _disabled_inactive(p: GpuPicture, unit: str) -> bool:
    props = p.shown.get(unit, {})
    file_state = props.get("UnitFileState") or next(
        (f.state for f in p.unit_files if f.unit == unit), "")
    active = props.get("ActiveState") or next((r.active for r in p.units if r.unit == unit), "")
    return file_state in ("disabled", "masked") and active in ("inactive", "failed", "")


def _gpus_of(members: list[h.Holder], held: list[GpuStat]) -> list[GpuStat]:
    uuids = {u for x in members for u in x.gpu_uuids}
    mine = [g for g in held if g.uuid in uuids]
    return mine or held  # found without nvidia-smi's PID map: every held GPU


def _holder_evidence(x: h.Holder, p: GpuPicture) -> dict[str, Any]:
    container = x.restarter.name if x.restarter.kind == "docker" else None
    return {"pid": x.pid or None, "args": x.args[:1000], "user": x.user,
            "found_by": x.found_by, "hidden": x.hidden, "container": container,
            "slurm_job": x.slurm_job, "used_mib": x.used_mib, "elapsed_s": x.elapsed_s,
            "unit": x.cgroup_unit, "started_after_boot_s": started_after_boot(x, p.clock),
            "kind": x.kind, "unit_active_after_boot_s": _unit_start(x, p),
            "uptime_s": p.clock[0] - p.clock[1] if p.clock else None}


def _unit_start(x: h.Holder, p: GpuPicture) -> float | None:
    """When the holder's unit became active, in seconds after boot (its
    ``ActiveEnterTimestampMonotonic``): how long memory has been held where ``ps`` cannot
    say (a PID from another namespace)."""
    name = x.restarter.name if x.restarter.kind == "systemd" else (x.cgroup_unit or "")
    raw = p.shown.get(name, {}).get("ActiveEnterTimestampMonotonic", "")
    return int(raw) / 1e6 if raw.isdigit() and int(raw) > 0 else None


def _gpu_evidence(gpus: list[GpuStat],
                  members: list[h.Holder] | None = None) -> list[dict[str, Any]]:
    """Per GPU, in the shape the chat's GPU table reads (utilization_pct, holder):
    ``memory_used_mib`` is what ``members`` hold there (the GPU's whole use without them),
    ``gpu_used_mib`` what the GPU has in use from every holder."""
    holder = [{"pid": x.pid or None, "unit": x.cgroup_unit} for x in (members or [])[:4]]
    return [{"index": g.index, "uuid": g.uuid, "name": g.name,
             "memory_used_mib": _own(g, members) if members else g.memory_used_mib,
             "gpu_used_mib": g.memory_used_mib,
             "memory_total_mib": g.memory_total_mib, "max_util_pct": g.max_util_pct,
             "utilization_pct": g.max_util_pct, "holder": holder, "samples": g.samples}
            for g in gpus]


def _who(members: list[h.Holder]) -> str:
    first = members[0]
    pids = ", ".join(str(x.pid) for x in members[:8]) + ("…" if len(members) > 8 else "")
    user = f", user {first.user}" if first.user else ""
    return f"PID{_s(len(members))} {pids} ({server_label(first)}{user})"


def _started(x: h.Holder, p: GpuPicture, opts: PlaybookOptions) -> str:
    after = started_after_boot(x, p.clock)
    if after is None:
        return "started"
    if after <= opts.boot_window_s:
        return f"started at boot (+{after:.0f} s)"
    return f"started {duration(after)} after boot"


def _mem(mibs: list[int]) -> str:
    values = sorted(mibs)
    low, high = gb(values[0]), gb(values[-1])
    if low == high:  # equal as shown: never "75.8 GiB–75.8 GiB"
        return low + (" each" if len(mibs) > 1 else "")
    return f"{low.removesuffix(' GiB')}–{high}"


def _util(gpus: list[GpuStat]) -> str:
    values = [g.max_util_pct for g in gpus if g.max_util_pct is not None]
    if not values:
        return "unknown utilization"
    lo, hi = min(values), max(values)
    return f"{hi}%" if lo == hi else f"{lo}–{hi}%"
