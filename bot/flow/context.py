"""Everything a flow step needs, built once per process and passed in explicitly."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from redis import Redis

from bot.chat.base import ChatBackend
from bot.config.settings import Settings
from bot.domain.approval import ApprovalPolicy, policy_from_settings
from bot.remediation.options import RemediationOptions, options_from_extra
from bot.ssh.base import SSHRunner
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.connection import connect
from storage.incidents import IncidentStore

KIND_PLAYBOOK = {"vm_restart": "vm_restart", "vram_idle": "vram_idle", "disk_full": "disk_full",
                 "gpu_xid": "gpu_health", "gpu_ecc": "gpu_health", "gpu_missing": "gpu_health"}


def playbook_for(kind: str) -> str:
    """Unknown alert kinds get the generic triage playbook."""
    return KIND_PLAYBOOK.get(kind, "triage")


@dataclass
class FlowContext:
    settings: Settings
    redis: Redis  # decode_responses=True
    redis_bytes: Redis  # RQ and the extraction records
    runner: SSHRunner
    chat: ChatBackend
    channel: str
    incidents: IncidentStore
    audit: AuditLog
    approvals: ApprovalStore
    policy: ApprovalPolicy
    remediation: RemediationOptions
    clock: Callable[[], float] = time.time
    bot_user: str = "incident-bot"
    progress_interval_s: float = 2.0
    notes: list[str] = field(default_factory=list)  # step timings, for the demo's summary


def build_context(settings: Settings, runner: SSHRunner, chat: ChatBackend,
                  *, channel: str | None = None) -> FlowContext:
    redis = connect(settings.redis_url)
    redis_bytes = connect(settings.redis_url, decode=False)
    return FlowContext(
        settings=settings, redis=redis, redis_bytes=redis_bytes, runner=runner, chat=chat,
        channel=channel or settings.slack.channel or "incidents",
        incidents=IncidentStore(redis, group_wait_s=settings.alerts.group_wait_s),
        audit=AuditLog(redis), approvals=ApprovalStore(redis),
        policy=policy_from_settings(settings),
        remediation=options_from_extra(settings.extra, redis=redis_bytes),
    )
