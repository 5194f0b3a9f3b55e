"""Wire the scheduler for ``serve``: digest, escalation and sampling built from settings.

``approval_expiry`` and ``progress`` belong to the approvals and extraction code; the
caller passes their callables in ``extra_jobs``. Returns ``None`` when the scheduler is
switched off (``extra.scheduler.enabled: false``), e.g. for a replica that only serves.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from bot.chat.base import ChatBackend, MessageRef
from bot.config.inventory import known, resolve, slurm_host
from bot.config.settings import Settings
from bot.digest.postmortem_source import recent_postmortems
from bot.digest.response_stats import ResponseRow, response_stats
from bot.digest.runner import AuditActions, DigestRunner, StoreIncidents
from bot.digest.sampler import Sampler, ssh_probe
from bot.domain.slurm import DrainedNode
from bot.remediation.slurm import DrainedCache
from bot.schedule.drained_escalation import DrainedEscalator
from bot.schedule.escalation import EscalationSettings, build_escalator, resolve_target
from bot.schedule.jobs import JobFunc, build_jobs, build_scheduler, load_sections
from bot.schedule.leader import LeaderScheduler
from bot.ssh.base import SSHRunner
from storage.audit import AuditLog
from storage.incidents import IncidentStore
from storage.stores import Stores

log = logging.getLogger(__name__)
DEFAULT_OUT = Path(tempfile.gettempdir()) / "incident-bot-digests"  # charts are uploaded


def message_ref_of(store: IncidentStore) -> Callable[[str], MessageRef | None]:
    """Where the incident's chat message is, once the flow has posted it."""

    def lookup(incident_id: str) -> MessageRef | None:
        incident = store.get(incident_id)
        chat = incident.chat if incident is not None else None
        return MessageRef(chat.channel, chat.ts) if chat is not None else None

    return lookup


def build_digest_runner(settings: Settings, stores: Stores, chat: ChatBackend,
                        out_dir: Path = DEFAULT_OUT, *,
                        runner: SSHRunner | None = None) -> DigestRunner:
    """What the digest job and ``/ir digest now`` both use (``runner.now(channel)``).
    With ``runner``, the digest lists the drained Slurm nodes too (issue 26)."""
    _, digest_cfg, _ = load_sections(settings.extra)
    incidents = stores.incidents()
    return DigestRunner(stores.samples(), chat, out_dir,
                        incidents=StoreIncidents(incidents),
                        actions=AuditActions(stores.audit()), cfg=digest_cfg,
                        drained=drained_source(settings, runner),
                        response=partial(period_response, incidents, stores.audit()),
                        rma=stores.health_history().rma)


def period_response(incidents: IncidentStore, audit: AuditLog, start: float,
                    end: float) -> list[ResponseRow]:
    """MTTA, MTTR and the one-click share per kind of the incidents opened in the period,
    from their postmortems (the audit trail)."""
    return response_stats(p for p in recent_postmortems(incidents, audit, start)
                          if p.detected_at < end)


def drained_source(settings: Settings, runner: SSHRunner | None,
                   ) -> Callable[[], list[DrainedNode]] | None:
    """The drained Slurm nodes, read on the inventory's first Slurm host (None: no runner
    or no Slurm host, so the digest says nothing about Slurm)."""
    name = slurm_host(settings)
    if runner is None or name is None:
        return None
    cache = DrainedCache(runner, lambda: known(settings, name),
                         settings.ssh_defaults.command_timeout_s, ttl_s=0.0)
    return cache.cached


def build_leader(settings: Settings, stores: Stores, chat: ChatBackend, *,
                 runner: SSHRunner | None = None, extra_jobs: Mapping[str, JobFunc] | None = None,
                 out_dir: Path = DEFAULT_OUT) -> LeaderScheduler | None:
    """The lease-holding scheduler with every job this settings file asks for."""
    sched_cfg, digest_cfg, esc_cfg = load_sections(settings.extra)
    if not sched_cfg.enabled:
        return None
    incidents = stores.incidents()
    jobs: dict[str, JobFunc] = dict(extra_jobs or {})
    escalator = build_escalator(settings, esc_cfg, stores, chat, message_ref_of(incidents))
    drained = build_drained_escalator(settings, esc_cfg, stores, chat, incidents, runner)
    if escalator is not None:
        jobs["escalation"] = lambda _firing: _discard(
            (escalator.run(), drained.run() if drained is not None else None))
    if runner is not None and settings.hosts:
        probe = ssh_probe(runner, lambda h: resolve(settings, h),
                          lambda h: settings.hosts[h].expected_mounts or ["/"],
                          timeout_s=settings.ssh_defaults.command_timeout_s)
        sampler = Sampler(stores.samples(), probe, lambda: list(settings.hosts))
        jobs["sampling"] = lambda _firing: _discard(sampler.sample_once())
    digests = build_digest_runner(settings, stores, chat, out_dir, runner=runner)
    specs = build_jobs(sched_cfg, jobs,
                       digest=lambda firing, schedule: digests.for_slot(firing.ts, schedule),
                       digest_cfg=digest_cfg, default_channel=settings.slack.channel)
    log.info("scheduler jobs: %s", ", ".join(s.name for s in specs))
    return build_scheduler(stores, sched_cfg, specs)


def build_drained_escalator(settings: Settings, cfg: EscalationSettings, stores: Stores,
                            chat: ChatBackend, incidents: IncidentStore,
                            runner: SSHRunner | None) -> DrainedEscalator | None:
    """Escalation of Slurm nodes the bot drained too long ago (None: no Slurm host, no
    runner, or escalation off); posts where the incident escalations go."""
    source = drained_source(settings, runner)
    target = resolve_target(cfg, settings.slack.escalation_channel, settings.slack.channel,
                            settings.slack.oncall)
    if source is None or target is None:
        return None
    return DrainedEscalator(stores.claims(), chat, replace(target, in_thread=False), source,
                            lambda: {i.id for i in incidents.list(open_only=True)},
                            cfg.drained_max_s)


def _discard(_: object) -> None:
    """Jobs return nothing; what they did is in logs and metrics."""


def lifespan_hooks(scheduler: LeaderScheduler | None) -> tuple[list[Callable[[], Any]],
                                                               list[Callable[[], Any]]]:
    """``on_startup`` / ``on_shutdown`` lists for ``bot.ingest.http.create_app``."""
    if scheduler is None:
        return [], []
    return [scheduler.start], [scheduler.stop]
