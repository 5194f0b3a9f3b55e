"""The host side every step shares: inventory lookup, the host's jobs, running a playbook,
and the remediation options one action on that host runs with."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from bot.config import inventory
from bot.core.errors import UserError
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.incident import Incident
from bot.flow.context import FlowContext, playbook_for
from bot.remediation.options import RemediationOptions
from bot.ssh.base import SSHTarget
from playbooks import run_playbook

log = logging.getLogger(__name__)


def target_for(ctx: FlowContext, host: str) -> SSHTarget | None:
    try:
        return inventory.resolve(ctx.settings, host)
    except UserError:
        return None


def interrupted_job_ids(ctx: FlowContext, host: str) -> list[str]:
    """Jobs on ``host`` that stopped without finishing (vm_restart reports them)."""
    from bot.extract.status import interrupted_jobs  # torch-free, but keep the flow lazy

    return [j.job_id for j in interrupted_jobs(ctx.redis_bytes, host)]


def protected_dirs(ctx: FlowContext, host: str) -> tuple[str, ...]:
    """Output directories of the host's unfinished jobs (queued, running, paused,
    interrupted, failed): a disk cleanup must never delete what a resume will read."""
    from bot.remediation.cleanup import unfinished_output_dirs

    return unfinished_output_dirs(ctx.redis_bytes, host)


def act_options(ctx: FlowContext, host: str) -> RemediationOptions:
    """The options for one action on ``host``: the configured ones, the inventory's
    allowed prefixes, and its jobs' output dirs, read at act time (a job paused a second
    ago counts)."""
    entry = ctx.settings.hosts.get(host)
    allowed = tuple(entry.allowed_path_prefixes) if entry else ctx.remediation.allowed_prefixes
    dirs = set(ctx.remediation.protected_dirs) | set(protected_dirs(ctx, host))
    return replace(ctx.remediation, allowed_prefixes=allowed, protected_dirs=tuple(sorted(dirs)))


def diagnose(ctx: FlowContext, incident: Incident,
             target: SSHTarget | None) -> tuple[Diagnosis, dict[str, Any]]:
    """Run the incident kind's playbook; an unknown host is a finding, not a crash."""
    context: dict[str, Any] = {"interrupted_jobs": []}
    try:
        context["interrupted_jobs"] = [
            {"job_id": j} for j in interrupted_job_ids(ctx, incident.host)]
    except Exception:  # the job list is context, never a reason not to diagnose
        log.warning("could not read interrupted jobs for %s", incident.host, exc_info=True)
    name = playbook_for(incident.kind)
    if target is None:
        finding = Finding("inventory.unknown_host", Severity.WARNING,
                          f"{incident.host} is not in the inventory",
                          "Add it under `hosts:` in the config to diagnose it over SSH.")
        return Diagnosis(incident.host, name, DiagnosisStatus.UNREACHABLE, 0.0, (finding,)), context
    options = inventory.options_for(ctx.settings, target)
    diagnosis = run_playbook(ctx.runner, target, name, options=options, context=context)
    if name == "disk_full" and diagnosis.status is not DiagnosisStatus.UNREACHABLE:
        diagnosis = _with_cleanup(ctx, diagnosis, target, options.disk_full_pct)
    return diagnosis, context


def _with_cleanup(ctx: FlowContext, diagnosis: Diagnosis, target: SSHTarget,
                  full_pct: float) -> Diagnosis:
    """The cleanup proposal; a probe that fails leaves the diagnosis as the playbook made it."""
    from bot.flow.cleanup_offer import with_cleanup

    opts = act_options(ctx, target.name)
    try:
        return with_cleanup(diagnosis, ctx.runner, target, allowed=opts.allowed_prefixes,
                            protected=opts.protected_dirs, full_pct=full_pct, now=ctx.clock())
    except Exception:  # the proposal is an extra, never a reason the diagnosis fails
        log.warning("cleanup candidates on %s failed", target.name, exc_info=True)
        return diagnosis
