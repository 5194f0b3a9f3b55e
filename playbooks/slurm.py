"""On a Slurm node, the first proposal for a hardware fault is to drain the node, and a
job's process is ended through the scheduler (requeue, cancel), never killed.

Pure rule over a finished report: when the host is a Slurm node (the inventory's
``slurm_node``) and a finding says its GPUs are broken, wedged, missing, behind a down
fabric or unreadable by the driver, ``slurm.drain`` goes first, so no new job lands on
the node before any reset or reboot. Its reason is the finding's title, cut to the
reason grammar, and names the incident when the caller's context carries one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bot.core import strings as S
from bot.domain import validate
from bot.domain.findings import Finding, Severity
from bot.remediation.actions.slurm import SlurmCancel, SlurmDrain, SlurmRequeue
from playbooks.base import Report

# gpu_health's hardware findings (critical Xid, uncorrectable ECC, fallen off the bus,
# missing GPU, wedged GPU, NVSwitch fabric down) and the driver/library mismatch
HARDWARE = ("gpu.broken", "gpu.wedged", "gpu.missing", "gpu.fabric_manager", "gpu.tool_error")
_NOT_REASON = re.compile(r"[^A-Za-z0-9 .,:;()_/+-]+")
REASON_MAX = 160


def hardware_fault(findings: list[Finding]) -> Finding | None:
    """The critical hardware finding that says most: a broken GPU before a tool's error."""
    critical = [f for f in findings if f.code in HARDWARE and f.severity is Severity.CRITICAL]
    return min(critical, key=lambda f: HARDWARE.index(f.code), default=None)


def reason_text(title: str) -> str:
    """A finding's title in the drain-reason grammar: other characters become spaces,
    cut at a word under ``REASON_MAX``; "GPU hardware fault" when nothing is left."""
    text = " ".join(_NOT_REASON.sub(" ", title).split())
    text = text.lstrip(" .,:;()_/+-")
    if len(text) > REASON_MAX:
        text = text[:REASON_MAX].rsplit(" ", 1)[0].rstrip(" .,:;(_/+-")
    return text if validate.is_valid(validate.slurm_reason, text) else "GPU hardware fault"


def short_title(fault: Finding) -> str:
    """What the drain reason says: for one GPU, its verdict and the reason that names an Xid
    when there is one ("GPU 3 broken: Xid 79 since boot: GPU has fallen off the bus");
    else the title up to its first ``;``."""
    gpu = fault.evidence.get("gpu")
    if isinstance(gpu, dict) and gpu.get("reasons"):
        reasons = [str(r) for r in gpu["reasons"]]
        why = next((r for r in reasons if "Xid" in r), reasons[0])
        return f"GPU {gpu.get('index', '?')} {gpu.get('verdict', 'broken')}: {why}"
    return fault.title.split(";", 1)[0]


def drain_first(report: Report, node: str | None, context: Mapping[str, Any]) -> None:
    """Put ``slurm.drain`` of ``node`` in front of the report's proposals (see module)."""
    fault = hardware_fault(report.findings)
    if node is None or fault is None or not validate.is_valid(validate.slurm_node, node):
        return
    incident = str(context.get("incident_id") or "")
    params = {"node": node, "reason": reason_text(short_title(fault)),
              "incident": incident if validate.is_valid(validate.incident_ref, incident) else ""}
    report.propose(SlurmDrain.kind, params, S.SLURM_PROPOSE_DRAIN.format(
        node=node, finding=fault.title), S.SLURM_DRAIN_RISK)
    drain = next(a for a in report.actions if SlurmDrain.owns(a.kind))
    report.actions.remove(drain)
    report.actions.insert(0, drain)


def job_steps(report: Report, node: str | None) -> None:
    """For each Slurm job found holding GPU memory (``slurm.job_holder``), requeue and
    cancel as their own proposals: the scheduler ends the job, the bot never kills it."""
    if node is None or not validate.is_valid(validate.slurm_node, node):
        return
    for f in report.findings:
        job = str(f.evidence.get("job") or "")
        if f.code != "slurm.job_holder" or not validate.is_valid(validate.slurm_job, job):
            continue
        who = {"job": job, "user": f.evidence.get("user") or "unknown", "node": node,
               "pid": f.evidence.get("pid")}
        report.propose(SlurmRequeue.kind, {"node": node, "job": job},
                       S.SLURM_PROPOSE_REQUEUE.format(**who), S.SLURM_REQUEUE_RISK)
        report.propose(SlurmCancel.kind, {"node": node, "job": job},
                       S.SLURM_PROPOSE_CANCEL.format(**who), S.SLURM_CANCEL_RISK)
