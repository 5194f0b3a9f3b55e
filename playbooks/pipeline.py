"""One diagnosis pipeline: every playbook runs with the host's GPU view beside it.

The GPU-health probes (``nvidia-smi -q -x``, the kernel log's Xids, the tool's own errors
and exit status, the inventory's count) are started first, the playbook's own probes run
on the same connection meanwhile, and the view's findings are merged in: a kind adds
probes, it never removes the per-GPU verdicts. Probes both ask for (the sampler, the
compute-apps list, the /dev/nvidia* users) run once (``Session.submit``).

A probe the host refused (sudo's "a password is required", "Operation not permitted", a
tool that is not installed) is a finding of its own in the tool's words, so a reading
that did not happen never passes for "nothing there" (the GPU view says nvidia-smi's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from bot.core import strings as S
from bot.domain.findings import Finding, ProbeResult, Severity
from playbooks import gpu_health, gpu_view
from playbooks.base import Report, Session
from playbooks.parsers.refusal import RefusalKind, refused

# the kind's findings the GPU view says better (its tool errors name why there are no rows)
SUPERSEDED_BY_TOOL_ERRORS = ("gpu.no_data",)
# the view's pointer to vram_idle, pointless once vram_idle (or vm_restart) has traced holders
TRACED = ("gpu.idle_vram_held", "gpu.busy_holder", "gpu.free")


def run_with_view(run: Callable[[Session, Mapping[str, Any]], Report], session: Session,
                  context: Mapping[str, Any]) -> Report:
    """``run`` (a playbook) with the GPU view started before it and merged after it."""
    pending = gpu_health.start(session)
    own = run(session, context)
    report = merge(gpu_view.view(pending, session.target.name, traced(own)), own)
    refusals(session.results, report)
    return report


def traced(own: Report) -> frozenset[str]:
    """GPUs the playbook traced to a holder no process of which is visible (a unit or a
    container in a PID namespace this login cannot see)."""
    return frozenset(
        str(g.get("uuid")) for f in own.findings if f.code in TRACED
        if any(isinstance(x, Mapping) and x.get("hidden") for x in f.evidence.get("holders") or [])
        for g in f.evidence.get("gpus") or [] if isinstance(g, Mapping) and g.get("uuid"))


# probes whose refusal the GPU view already says in nvidia-smi's words
GPU_VIEW_PROBES = ("gpus", "gpu_glance", "gpu_processes", "gpu_xml")
# tools every host has: one that is missing is worth saying (docker, lsof, crontab or
# Slurm's are simply not installed on many hosts)
BASE_TOOLS = ("processes", "process_states", "cgroups", "df", "df_inodes", "kernel_log",
              "units", "unit_files", "unit_details", "clock", "boots", "journal", "memory")


def refusals(results: list[ProbeResult], report: Report) -> None:
    """One ``probe.refused`` finding per refused read, in the tool's own words."""
    for result in list(results):
        said = refused(result.stdout, result.stderr, result.exit_status)
        if said is None or result.name in GPU_VIEW_PROBES or (
                said.kind is RefusalKind.MISSING and result.name not in BASE_TOOLS):
            continue
        what = S.PROBE_WHAT.get(result.name) or S.PROBE_WHAT_COMMAND.format(
            command=result.command[:80])
        report.find("probe.refused", Severity.WARNING,
                    S.DIAG_PROBE_REFUSED.format(what=what, quote=said.quote),
                    probe=result.name, command=result.command[:500], kind=said.kind.value,
                    quote=said.quote, exit_status=result.exit_status)


def merge(view: Report, own: Report) -> Report:
    """The kind's report with the GPU view's findings in (pure). Order: how ``auto``
    chose, the GPU view, then the kind's own findings; the kind's actions first, then the
    view's (a GPU reset with what it must stop around it, a reboot: the buttons its step
    names). A reboot waits where the kind proposes something of its own or finds a full
    disk (``_waiting``, ``URGENT``): it is said as a person's step for after those, and
    offered on the look after them."""
    codes = {f.code for f in view.findings}
    own_codes = {f.code for f in own.findings}
    wedged = "gpu.wedged" in codes
    kept_own = [f for f in own.findings if not _superseded(f, codes, wedged)]
    kept_view = [f for f in view.findings
                 if not (f.code == "gpu.held_idle" and own_codes & set(TRACED))]
    auto = [f for f in kept_own if f.code == "playbook.auto"]
    rest = [f for f in kept_own if f.code != "playbook.auto"]
    ids = {a.id for a in own.actions}
    if own.actions or own_codes & URGENT:
        kept_view, waiting = _waiting(kept_view)
        ids |= waiting
    out = Report(own.host, playbook=own.playbook, actions=[
        *own.actions, *(a for a in view.actions if a.id not in ids)])
    for f in auto + kept_view + rest:
        if all((g.code, g.title) != (f.code, f.title) for g in out.findings):
            out.findings.append(f)
    return out


# what the kind finds that a reboot must wait for even before anything is proposed for it
# (a full disk's cleanup is planned by the flow, not the playbook): a reboot frees no byte
URGENT = frozenset({"disk.full"})


def _waiting(findings: list[Finding]) -> tuple[list[Finding], set[str]]:
    """The view's steps that wait for the kind's own proposals (a reboot: it stops every
    process, so the narrower fix goes first): each finding said as its ``otherwise``
    words, and the ids of the buttons it withdraws."""
    out: list[Finding] = []
    withdrawn: set[str] = set()
    for f in findings:
        if f.evidence.get("button") and f.evidence.get("otherwise"):
            withdrawn.add(str(f.evidence["button"]))
            f = replace(f, title=str(f.evidence["otherwise"]),
                        evidence={k: v for k, v in f.evidence.items()
                                  if k not in ("button", "otherwise")})
        out.append(f)
    return out, withdrawn


def _superseded(f: Finding, view_codes: set[str], wedged: bool) -> bool:
    if f.code in SUPERSEDED_BY_TOOL_ERRORS and "gpu.tool_error" in view_codes:
        return True
    # "held, and no process could be named": the view's wedged verdict says it exactly
    return f.code == "gpu.idle_vram_held" and wedged and not f.evidence.get("holders")
