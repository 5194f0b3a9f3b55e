"""Everything a flow step needs, built once per process and passed in explicitly."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from bot.chat.base import ChatBackend
from bot.config.policy import policy_from_settings
from bot.config.settings import Settings
from bot.domain.approval import ApprovalPolicy
from bot.domain.kinds import playbook_for as playbook_for  # the flow steps import it from here
from bot.flow.reconcile import reconcile_settings
from bot.remediation.options import RemediationOptions, options_from_extra
from bot.ssh.base import SSHRunner
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.connection import Redis, connect
from storage.incidents import IncidentStore
from storage.renders import RenderLedger


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
    renders: RenderLedger
    actions: Executor | None = None  # approved actions run here, off the click; None: inline
    clock: Callable[[], float] = time.time
    bot_user: str = "incident-bot"
    progress_interval_s: float = 2.0
    notes: list[str] = field(default_factory=list)  # step timings, for the demo's summary

    def run_off_thread(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run an approved action in the bounded executor (inline when there is none)."""
        if self.actions is None:
            fn(*args)
        else:
            self.actions.submit(fn, *args)


def build_context(settings: Settings, runner: SSHRunner, chat: ChatBackend,
                  *, channel: str | None = None, actions: Executor | None = None) -> FlowContext:
    redis = connect(settings.redis_url)
    redis_bytes = connect(settings.redis_url, decode=False)
    return FlowContext(
        settings=settings, redis=redis, redis_bytes=redis_bytes, runner=runner, chat=chat,
        channel=channel or settings.slack.channel or "incidents",
        incidents=IncidentStore(redis, group_wait_s=settings.alerts.group_wait_s,
                                deadlines=reconcile_settings(settings.extra).deadlines()),
        audit=AuditLog(redis), approvals=ApprovalStore(redis),
        policy=policy_from_settings(settings),
        remediation=options_from_extra(settings.extra, redis=redis_bytes),
        renders=RenderLedger(redis), actions=actions,
    )
