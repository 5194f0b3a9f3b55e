"""One bot process, assembled: HTTP service (alerts, health, metrics), the Slack app on the
same port, the flow consumer, and the leader-leased scheduler.

Every piece keeps its state in Redis, so several of these behind a load balancer act as
one bot: any replica takes the next event, and only the lease holder schedules.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette

from bot.chat.base import ChatBackend
from bot.chat.interactions import ApprovalCallbacks, audit_sink
from bot.chat.slack_app import SlackApp, create_slack_app
from bot.config.settings import Settings
from bot.domain.approval import Approval
from bot.flow import approve_step, consumer, progress_step
from bot.flow.context import FlowContext, build_context
from bot.flow.slash_handlers import FlowSlashHandlers
from bot.ingest.http import create_app
from bot.schedule.leader import LeaderScheduler
from bot.ssh.base import SSHRunner
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog

log = logging.getLogger(__name__)


class _LateCallbacks:
    """The Slack app needs callbacks before the flow context (which needs its backend)."""

    ctx: FlowContext | None = None

    def callbacks(self) -> ApprovalCallbacks:
        return ApprovalCallbacks(on_approved=self.approved, on_denied=self.denied,
                                 on_expired=self.expired)

    def _ctx(self) -> FlowContext:
        if self.ctx is None:
            raise RuntimeError("service not assembled yet")
        return self.ctx

    def approved(self, approval: Approval, user: str) -> None:
        approve_step.on_approved(self._ctx(), approval, user)

    def denied(self, approval: Approval, user: str, reason: str) -> None:
        approve_step.on_denied(self._ctx(), approval, user, reason)

    def expired(self, approval: Approval) -> None:
        approve_step.on_expired(self._ctx(), approval)


@dataclass
class Service:
    ctx: FlowContext
    app: Starlette
    slack: SlackApp | None = None
    scheduler: LeaderScheduler | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start_background(self) -> None:
        """The flow consumer thread and the scheduler (which polls progress when leader)."""
        t = threading.Thread(target=consumer.run_forever, args=(self.ctx, self.stop_event),
                             name="flow-consumer", daemon=True)
        t.start()
        self.threads.append(t)
        if self.scheduler is not None:
            self.scheduler.start()

    def close(self) -> None:
        """Stop the consumer, hand the scheduler lease back, finish Slack work. Idempotent."""
        if self.stop_event.is_set():
            return
        self.stop_event.set()
        if self.scheduler is not None:
            self.scheduler.stop()
        for t in self.threads:
            t.join(timeout=5)
        if self.slack is not None:
            self.slack.close()
        self.ctx.runner.close()


def _scheduler(settings: Settings, ctx: FlowContext, slack: SlackApp | None) -> Any:
    from bot.schedule.wiring import build_leader

    desk = slack.desk if slack is not None else None

    def progress(_firing: Any) -> None:
        progress_step.poll_all(ctx)

    def expiry(_firing: Any) -> None:
        if desk is not None:
            desk.expire_due()

    jobs = {"progress": progress, "approval_expiry": expiry}
    return build_leader(settings, ctx.redis, ctx.chat, runner=ctx.runner, extra_jobs=jobs)


def _digest_now(ctx: FlowContext) -> Any:
    """``/ir digest now``: the same runner as the scheduled digest, in the incident channel."""

    def post() -> None:
        import tempfile
        from pathlib import Path

        from bot.schedule.wiring import build_digest_runner  # matplotlib: only when asked

        out = Path(tempfile.gettempdir()) / "incident-bot-digests"
        build_digest_runner(ctx.settings, ctx.redis, ctx.chat, out).now(ctx.channel)

    return post


def check_sections(settings: Settings) -> None:
    """Validate every ``extra`` section now: a typo fails at start, not at 3 a.m."""
    from bot.config.inventory import diagnostics_settings
    from bot.domain.xid import xid_policy_from_extra
    from bot.extract.config import extract_settings
    from bot.remediation.options import options_from_extra
    from bot.schedule.jobs import load_sections

    diagnostics_settings(settings)
    options_from_extra(settings.extra)
    load_sections(settings.extra)
    extract_settings(settings)
    xid_policy_from_extra(settings.extra)


def build_service(settings: Settings, *, runner: SSHRunner | None = None,
                  chat: ChatBackend | None = None, with_scheduler: bool = True) -> Service:
    check_sections(settings)
    late = _LateCallbacks()
    runner = runner or ParamikoPool(settings.ssh_defaults)
    slack: SlackApp | None = None
    if chat is None:
        from storage.connection import connect

        redis = connect(settings.redis_url)
        slack = create_slack_app(settings, redis, late.callbacks(),
                                 audit=audit_sink(AuditLog(redis)))
        chat = slack.backend
    ctx = build_context(settings, runner, chat)
    late.ctx = ctx
    if slack is not None:
        slack.listeners.handlers = FlowSlashHandlers(ctx, digest_now=_digest_now(ctx))
    routes = slack.routes() if slack is not None else []
    closers: list[Service] = []  # uvicorn's graceful shutdown runs this before it exits

    def close_on_shutdown() -> None:
        for service in closers:
            service.close()

    app = create_app(settings, ctx.redis, extra_routes=routes, store=ctx.incidents,
                     on_shutdown=[close_on_shutdown])
    scheduler = _scheduler(settings, ctx, slack) if with_scheduler else None
    service = Service(ctx=ctx, app=app, slack=slack, scheduler=scheduler)
    closers.append(service)
    return service
