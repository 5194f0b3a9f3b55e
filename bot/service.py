"""One bot process, assembled top to bottom: Redis → chat backend → flow context → approval
desk → Slack app (HTTP routes or Socket Mode) → HTTP service → leader-leased scheduler.

Every piece keeps its state in Redis, so several of these behind a load balancer act as
one bot: any replica takes the next event, and only the lease holder schedules.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from starlette.applications import Starlette

from bot.chat.backends import make_backend
from bot.chat.base import ChatBackend
from bot.chat.home_tab import FleetSource, fleet_source
from bot.chat.interactions import ApprovalDesk, audit_sink
from bot.chat.slack import SlackBackend, SlackGroups
from bot.chat.slack_app import SlackApp, create_slack_app, socket_mode_wanted, start_socket_mode
from bot.config.settings import Settings
from bot.flow import act_step, consumer, reconcile, timers
from bot.flow.context import FlowContext, build_context
from bot.flow.dispatch import FlowCallbacks
from bot.flow.message import publish
from bot.flow.slash_handlers import FlowSlashHandlers
from bot.ingest.http import create_app
from bot.schedule.leader import LeaderScheduler
from bot.ssh.base import SSHRunner
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog
from storage.connection import connect
from storage.events import IncidentEvents
from storage.samples import SampleStore

log = logging.getLogger(__name__)
ACTION_WORKERS = 4  # approved actions running at once per replica (each holds SSH channels)


@dataclass
class Service:
    ctx: FlowContext
    app: Starlette
    desk: ApprovalDesk
    slack: SlackApp | None = None
    scheduler: LeaderScheduler | None = None
    socket_mode: bool = False
    stop_event: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    _socket: Any = None

    def start_background(self) -> None:
        """The flow consumer thread, the scheduler, and Socket Mode when configured."""
        t = threading.Thread(target=consumer.run_forever, args=(self.ctx, self.stop_event),
                             name="flow-consumer", daemon=True)
        t.start()
        self.threads.append(t)
        t = threading.Thread(target=_reconciler(self.ctx), args=(self.stop_event,),
                             name="reconciler", daemon=True)
        t.start()
        self.threads.append(t)
        if self.scheduler is not None:
            self.scheduler.start()
        if self.slack is not None and self.socket_mode:
            self._socket = start_socket_mode(self.slack, self.ctx.settings)

    def close(self) -> None:
        """Stop the consumer, hand the scheduler lease back, finish Slack work. Idempotent."""
        if self.stop_event.is_set():
            return
        self.stop_event.set()
        if self._socket is not None:
            self._socket.close()
        if self.scheduler is not None:
            self.scheduler.stop()
        for t in self.threads:
            t.join(timeout=5)
        if self.ctx.actions is not None:
            self.ctx.actions.shutdown(wait=True)
        if self.slack is not None:
            self.slack.close()
        self.ctx.runner.close()


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
    reconcile.reconcile_settings(settings.extra)


def build_service(settings: Settings, *, runner: SSHRunner | None = None,
                  chat: ChatBackend | None = None, with_scheduler: bool = True) -> Service:
    """Assemble the bot; ``chat`` overrides ``settings.chat_backend`` (tests, demo)."""
    check_sections(settings)
    redis = connect(settings.redis_url)
    audit = audit_sink(AuditLog(redis))
    chat = chat or make_backend(settings, redis=redis, audit=audit)
    actions = ThreadPoolExecutor(max_workers=ACTION_WORKERS, thread_name_prefix="flow-action")
    ctx = build_context(settings, runner or ParamikoPool(settings.ssh_defaults), chat,
                        actions=actions)
    slack_chat = chat if isinstance(chat, SlackBackend) else None
    desk = ApprovalDesk(ctx.approvals, ctx.policy, FlowCallbacks(ctx).callbacks(), audit=audit,
                        groups=SlackGroups(slack_chat.client) if slack_chat else None)
    slack = _slack_app(settings, ctx, desk, slack_chat)
    closers: list[Service] = []  # uvicorn's graceful shutdown runs this before it exits
    routes = slack.routes() if slack is not None and not socket_mode_wanted(settings) else []
    app = create_app(settings, ctx.redis, extra_routes=routes, store=ctx.incidents,
                     on_shutdown=[partial(_close_all, closers)])
    service = Service(ctx=ctx, app=app, desk=desk, slack=slack,
                      scheduler=_scheduler(settings, ctx, desk) if with_scheduler else None,
                      socket_mode=slack is not None and socket_mode_wanted(settings))
    closers.append(service)
    return service


def _slack_app(settings: Settings, ctx: FlowContext, desk: ApprovalDesk,
               backend: SlackBackend | None) -> SlackApp | None:
    if backend is None:
        return None
    slash = FlowSlashHandlers(ctx, digest_now=partial(timers.digest_now, ctx),
                              decide=desk.incident)
    return create_slack_app(settings, ctx.redis, desk.callbacks, slash=slash, backend=backend,
                            desk=desk, home=_fleet(settings, ctx))


def _fleet(settings: Settings, ctx: FlowContext) -> FleetSource:
    """The App Home's snapshot: open incidents, running extractions, the newest GPU samples
    of every sampled or inventory host (an inventory host's missing GPUs count as broken)."""
    from bot.extract.queue import list_jobs

    expected = {name: host.gpus or 0 for name, host in settings.hosts.items()}
    return fleet_source(ctx.incidents, SampleStore(ctx.redis),
                        partial(list_jobs, ctx.redis_bytes), expected, ctx.clock)


def _scheduler(settings: Settings, ctx: FlowContext, desk: ApprovalDesk) -> Any:
    from bot.schedule.wiring import build_leader

    jobs = {"progress": partial(timers.poll_progress, ctx),
            "approval_expiry": partial(timers.expire_approvals, desk, ctx)}
    return build_leader(settings, ctx.redis, ctx.chat, runner=ctx.runner, extra_jobs=jobs)


def _reconciler(ctx: FlowContext) -> Callable[[threading.Event], None]:
    """The re-drive loop (issue 24): a stuck diagnosis is re-sent as ``incident.opened``
    (any replica's consumer claims it), a stuck action is failed with Retry."""
    cfg = reconcile.reconcile_settings(ctx.settings.extra)
    events = IncidentEvents(ctx.redis)
    sweep = partial(reconcile.reconcile_once, ctx.incidents, ctx.audit, ctx.clock,
                    rediagnose=lambda i: events.publish("incident.opened", i),
                    fail_stalled=partial(act_step.fail_stalled, ctx),
                    publish=partial(publish, ctx), max_attempts=cfg.max_attempts)
    return partial(reconcile.run_forever, ctx.incidents, sweep, every_s=cfg.every_s)


def _close_all(services: list[Service]) -> None:
    for service in services:
        service.close()
