"""The host side every step shares: inventory lookup, interrupted jobs, running a playbook."""

from __future__ import annotations

import logging
from typing import Any

from bot.config import inventory
from bot.core.errors import UserError
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.incident import Incident
from bot.flow.context import FlowContext, playbook_for
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
    return run_playbook(ctx.runner, target, name, options=options, context=context), context
