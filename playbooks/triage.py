"""triage, for alerts of unknown kind: uptime and load, memory, failed units, dmesg tail."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core import fmt
from bot.core import strings as S
from bot.domain.findings import Severity
from playbooks import probes
from playbooks.base import Report, Session
from playbooks.parsers import host
from playbooks.text import plural

NAME = "triage"
DESCRIPTION = "unknown alert kind: uptime, load, memory, failed units, kernel messages"


def run(session: Session, context: Mapping[str, Any]) -> Report:
    report = Report(session.target.name)
    got = session.parsed(session.submit_many({
        "uptime": probes.uptime(), "memory": probes.memory(), "failed": probes.failed_units(),
        "dmesg": probes.dmesg_tail()}))
    cores_load = host.parse_load(got["uptime"])
    load = ", ".join(f"{v:.2f}" for v in cores_load) if cores_load else "?"
    up = got["uptime"].split(",")[0].split("up", 1)[-1].strip() if "up" in got["uptime"] else "?"
    report.find("host.uptime", Severity.INFO, S.DIAG_UPTIME.format(uptime=up, load=load),
                uptime=got["uptime"][:200], load=cores_load)
    _memory(got["memory"], report)
    failed = [r.unit for r in got["failed"]]
    if failed:
        report.find("systemd.failed_units", Severity.WARNING, S.DIAG_FAILED_UNITS.format(
            n=len(failed), s=plural(len(failed)), names=", ".join(failed)[:300]), units=failed)
    if got["dmesg"]:
        report.find("kernel.dmesg", Severity.INFO, S.DIAG_DMESG, lines=got["dmesg"])
    return report


def _memory(mem: host.Memory | None, report: Report) -> None:
    if mem is None or not mem.total:
        return
    avail = mem.available if mem.available is not None else mem.total - (mem.used or 0)
    severity = Severity.WARNING if avail < mem.total * 0.05 else Severity.INFO
    report.find("host.memory", severity, S.DIAG_MEMORY.format(
        used=fmt.size(mem.used), total=fmt.size(mem.total), avail=fmt.size(avail)),
        memory=vars(mem))
