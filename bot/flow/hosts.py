"""The host side every step shares: inventory lookup, the host's jobs, running a playbook,
and the remediation options one action on that host runs with."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bot.config import inventory
from bot.config.settings import Settings
from bot.core import strings
from bot.core.errors import UserError
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.incident import Incident
from bot.domain.kinds import playbook_for
from bot.flow.cleanup_offer import with_cleanup
from bot.jobs.book import JobBook
from bot.remediation.options import RemediationOptions
from bot.remediation.proposals import plannable
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks import run_playbook
from playbooks.glance import Glance, glance

log = logging.getLogger(__name__)


class Hosts:
    """The inventory's hosts as the flow sees them: where to reach each, what runs on it."""

    def __init__(self, settings: Settings, runner: SSHRunner, jobs: JobBook,
                 options: RemediationOptions, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings  # the inventory: hosts, their SSH and their options
        self.runner = runner
        self.jobs = jobs
        self.options = options
        self.clock = clock

    def target_for(self, host: str) -> SSHTarget | None:
        try:
            return inventory.known(self.settings, host)
        except UserError:
            return None

    def glance(self, host: str) -> Glance:
        """``/ir status HOST``: its GPUs and disks, read now (read-only probes)."""
        target = self.target_for(host)
        if target is None:
            return Glance(host, [], [], unreachable=strings.HOST_NOT_IN_INVENTORY.format(
                host=host))
        return glance(self.runner, target)

    def interrupted_job_ids(self, host: str) -> list[str]:
        """JobBook on ``host`` that stopped without finishing (vm_restart reports them)."""
        return self.jobs.interrupted(host)

    def act_options(self, host: str) -> RemediationOptions:
        """The options for one action on ``host``: the configured ones, the inventory's
        allowed prefixes, and its jobs' output dirs, read at act time (a job paused a
        second ago counts)."""
        entry = self.settings.hosts.get(host)
        allowed = tuple(entry.allowed_path_prefixes) if entry else self.options.allowed_prefixes
        dirs = set(self.options.protected_dirs) | set(self.jobs.unfinished_output_dirs(host))
        return replace(self.options, allowed_prefixes=allowed, protected_dirs=tuple(sorted(dirs)),
                       expected_gpus=entry.gpus if entry else None)

    def diagnose(self, incident: Incident, target: SSHTarget | None) -> Diagnosis:
        """Run the incident kind's playbook; an unknown host is a finding, not a crash."""
        # the incident id names the incident in a Slurm drain's reason ("incident-bot INC-7: ...")
        context: dict[str, Any] = {"interrupted_jobs": [], "incident_id": incident.id,
                                   "mount": incident.labels.get("mountpoint", "")}
        try:
            context["interrupted_jobs"] = [
                {"job_id": j} for j in self.interrupted_job_ids(incident.host)]
        except Exception:  # the job list is context, never a reason not to diagnose
            log.warning("could not read interrupted jobs for %s", incident.host, exc_info=True)
        name = playbook_for(incident.kind)
        if target is None:
            finding = Finding("inventory.unknown_host", Severity.WARNING,
                              strings.HOST_NOT_IN_INVENTORY.format(host=incident.host),
                              "Add it under `hosts:` in the config to diagnose it over SSH.")
            return Diagnosis(incident.host, name, DiagnosisStatus.UNREACHABLE, 0.0, (finding,))
        options = inventory.options_for(self.settings, target)
        diagnosis = run_playbook(self.runner, target, name, options=options, context=context)
        # the cleanup offer joins a disk_full diagnosis, asked for or picked by `auto`
        if diagnosis.playbook == "disk_full" and \
                diagnosis.status is not DiagnosisStatus.UNREACHABLE:
            diagnosis = self._with_cleanup(diagnosis, target, options.disk_full_pct,
                                           str(context["mount"]))
        return plannable(diagnosis, target)

    def _with_cleanup(self, diagnosis: Diagnosis, target: SSHTarget,
                      full_pct: float, alerted: str = "") -> Diagnosis:
        """The cleanup proposal; a probe that fails leaves the diagnosis as the playbook
        made it."""
        opts = self.act_options(target.name)
        try:
            return with_cleanup(diagnosis, self.runner, target, allowed=opts.allowed_prefixes,
                                protected=opts.protected_dirs, full_pct=full_pct,
                                now=self.clock(), alerted=alerted)
        except Exception:  # the proposal is an extra, never a reason the diagnosis fails
            log.warning("cleanup candidates on %s failed", target.name, exc_info=True)
            return diagnosis
