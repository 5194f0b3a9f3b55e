"""vm_restart: after an unexpected reboot, what came back and what did not.

Boot time and the previous boot (did it end cleanly?), failed units, GPU services that
start at boot (enabled units, ``@reboot`` cron lines, docker restart policies), expected
mounts that are missing, disk state, extraction jobs that were interrupted (passed in
as ``context["interrupted_jobs"]`` so playbooks stay free of Redis), and everything
vram_idle finds: it reuses vram_idle's probes and rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core import strings as S
from bot.domain.findings import Severity
from playbooks import disk_full, probes, vram_idle
from playbooks.base import PlaybookOptions, Report, Session
from playbooks.parsers import host, ps
from playbooks.parsers.disk import Filesystem
from playbooks.text import duration
from playbooks.trace import GpuPicture, gather

NAME = "vm_restart"
DESCRIPTION = "after a reboot: previous boot, failed units, GPU services started at boot, mounts"


def run(session: Session, context: Mapping[str, Any]) -> Report:
    report = Report(session.target.name)
    picture = gather(session, {  # queued behind the GPU probes the second round waits for
        "boots": probes.boots(), "tail": probes.previous_boot_tail(), "df": probes.df(),
        "inodes": probes.df_inodes(), "containers": probes.docker_inspect(),
        "options": probes.mount_options()})
    got = picture.extra
    opts = session.options
    _boot(got["boots"], got["tail"], picture.clock, report)
    _failed_units(picture, report)
    _autostart(picture, got["containers"], report)
    vram_idle.assess(picture, opts, report)
    _mounts(got["df"], got["options"], opts, report)
    disk_full.assess_space(got["df"], got["inodes"], opts, report)
    _jobs(context.get("interrupted_jobs") or [], report)
    return report


def _boot(boots: list[host.Boot], tail: str, clock: tuple[float, float] | None,
          report: Report) -> None:
    prev = next((b for b in reversed(boots) if b.index < 0), None)
    current = next((b for b in boots if b.index == 0), None)
    ago = duration(clock[0] - clock[1]) if clock else "?"
    if prev is None:
        state, severity, clean = S.DIAG_PREV_UNKNOWN, Severity.INFO, None
    else:
        clean = host.ended_cleanly(tail)
        state = S.DIAG_PREV_CLEAN if clean else S.DIAG_PREV_UNCLEAN
        severity = Severity.INFO if clean else Severity.CRITICAL
    gap = None
    if prev and current and prev.last and current.first:
        gap = (current.first - prev.last).total_seconds()
    report.find("boot.previous", severity, S.DIAG_BOOT_RECENT.format(ago=ago, prev=state),
                previous_boot=prev.boot_id if prev else None,
                current_boot=current.boot_id if current else None, clean=clean,
                down_s=gap, last_lines=host.tail(tail, 10))


def _failed_units(p: GpuPicture, report: Report) -> None:
    failed = [r.unit for r in p.units if r.active == "failed"]
    if failed:
        report.find("systemd.failed_units", Severity.WARNING, S.DIAG_FAILED_UNITS.format(
            n=len(failed), s="" if len(failed) == 1 else "s", names=", ".join(failed)[:300]),
            units=failed)


def _autostart(p: GpuPicture, containers: list[dict[str, Any]], report: Report) -> None:
    """GPU services that start by themselves at boot (named; actions come from vram_idle)."""
    for unit in p.gpu_units:
        props = p.shown.get(unit, {})
        state = props.get("UnitFileState") or next(
            (f.state for f in p.unit_files if f.unit == unit), "")
        if state in ("enabled", "enabled-runtime"):
            kind = ps.server_kind(props.get("ExecStart", "") or unit.replace("-", " ")) or "GPU"
            title = S.DIAG_AUTOSTART_UNIT.format(unit=unit, kind=kind,
                                                 restart=props.get("Restart", "?"))
            report.find("boot.gpu_autostart", Severity.WARNING, title, unit=unit,
                        properties=props)
    for line in p.crons:
        if line.schedule == "@reboot" and ps.server_kind(line.command):
            report.find("boot.gpu_autostart_cron", Severity.WARNING, S.DIAG_AUTOSTART_CRON.format(
                user=line.user, line=f"@reboot {line.command}"[:200]), cron=vars(line))
    for box in containers:
        policy = str(box.get("restart_policy", ""))
        text = f"{box.get('image', '')} {box.get('name', '')}"
        if policy in vram_idle.RESTARTING_POLICIES and ps.server_kind(text):
            report.find("boot.gpu_autostart_docker", Severity.WARNING,
                        S.DIAG_AUTOSTART_DOCKER.format(name=box.get("name"),
                                                       image=box.get("image"), policy=policy),
                        container=box)


def _mounts(space: list[Filesystem], options: dict[str, set[str]], opts: PlaybookOptions,
            report: Report) -> None:
    """Expected mounts: missing from df, or listed by findmnt with ``ro``."""
    mounted = {f.mount.rstrip("/") or "/" for f in space}
    for mount in opts.expected_mounts:
        path = mount.rstrip("/") or "/"
        if path not in mounted:
            report.find("mount.missing", Severity.CRITICAL,
                        S.DIAG_MOUNT_MISSING.format(mount=mount), mount=mount)
        elif "ro" in options.get(path, set()):
            report.find("mount.read_only", Severity.CRITICAL,
                        S.DIAG_MOUNT_READ_ONLY.format(mount=mount), mount=mount,
                        options=sorted(options[path]))


def _jobs(jobs: list[Any], report: Report) -> None:
    if not jobs:
        return
    names = ", ".join(str(j.get("job_id", j) if isinstance(j, dict) else j) for j in jobs[:5])
    report.find("extract.interrupted", Severity.WARNING, S.DIAG_JOBS_INTERRUPTED.format(
        n=len(jobs), s="" if len(jobs) == 1 else "s", jobs=names), jobs=jobs[:20])
