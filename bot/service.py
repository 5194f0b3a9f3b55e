"""One bot process, assembled top to bottom: Redis → chat backend (the plugin named by
``chat_backend``) → the flow → approval desk → the backend's interactive side (Slack's
HTTP routes or Socket Mode) → HTTP service → leader-leased scheduler.

Every piece keeps its state in Redis, so several of these behind a load balancer act as
one bot: any replica takes the next event, and only the lease holder schedules.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from bot.chat.backends import ChatApp, ChatPlugin, make_plugin
from bot.chat.base import ChatBackend
from bot.chat.home_tab import FleetSource, fleet_source
from bot.chat.interactions import ApprovalDesk, audit_sink
from bot.chat.outbox import LOOP as OUTBOX_LOOP
from bot.chat.policy_desk import PolicyApprovalDesk
from bot.config.policy import maintenance_from_settings, policies_from_settings
from bot.config.settings import Settings
from bot.core.heartbeat import Heartbeats
from bot.extensions import load_and_install
from bot.flow import reconcile, timers
from bot.flow.assembly import Flow, build_flow
from bot.flow.consumer import LOOP as CONSUMER_LOOP
from bot.flow.data_loss import DataLossWatch
from bot.flow.slash_handlers import FlowSlashHandlers
from bot.ingest.diagnose import ROUTE as DIAGNOSE_ROUTE
from bot.ingest.diagnose import DiagnoseEndpoint
from bot.ingest.http import create_app
from bot.paging.runner import build_paging
from bot.paging.runner import run_forever as run_paging
from bot.paging.service import PagingService
from bot.schedule.leader import LeaderScheduler
from bot.ssh.base import SSHRunner
from bot.ssh.pool import ParamikoPool
from storage.connection import StorageError
from storage.stores import Stores, open_stores

log = logging.getLogger(__name__)
ACTION_WORKERS = 4  # approved actions running at once per replica (each holds SSH channels)
DIAGNOSIS_WORKERS = 8  # incidents diagnosed at once per replica: a hung probe holds one
LOOP_GRACE_S = 10.0  # a loop failing (or silent) this long makes /readyz 503


@dataclass
class Service:
    settings: Settings
    stores: Stores  # opened once here; each component got the stores it uses
    flow: Flow
    app: Starlette
    desk: ApprovalDesk
    chat_app: ChatApp | None = None  # the backend's interactive side (Slack's Bolt app)
    scheduler: LeaderScheduler | None = None
    paging: PagingService | None = None
    diagnoses: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(
        max_workers=DIAGNOSIS_WORKERS, thread_name_prefix="flow-diagnosis"))
    # the background loops /readyz answers for; the steps a Redis refusal cut short; the
    # watch that notices Redis losing its data (issue 39)
    heartbeats: Heartbeats = field(default_factory=Heartbeats)
    interrupted: reconcile.CutShort = field(default_factory=reconcile.CutShort)
    data_loss: DataLossWatch | None = None
    stop_event: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start_background(self) -> None:
        """The flow consumer thread, the scheduler, and the chat backend's own side (Slack's
        Socket Mode when configured)."""
        consumer = self.flow.consumer(self.diagnoses, DIAGNOSIS_WORKERS)
        consumer.interrupted, consumer.heartbeats = self.interrupted, self.heartbeats
        self.flow.act.cut_short = self.interrupted
        cfg = reconcile.reconcile_settings(self.settings.extra)
        self.heartbeats.watch(CONSUMER_LOOP, LOOP_GRACE_S)
        self.heartbeats.watch(OUTBOX_LOOP, LOOP_GRACE_S)
        self.heartbeats.watch(reconcile.LOOP, 2 * cfg.every_s + LOOP_GRACE_S)
        t = threading.Thread(target=consumer.run_forever, args=(self.stop_event,),
                             name="flow-consumer", daemon=True)
        t.start()
        self.threads.append(t)
        loop = _reconciler(self.settings, self.flow, self.interrupted, self.heartbeats,
                           self.data_loss)
        r = threading.Thread(target=loop, args=(self.stop_event,),
                             name="reconciler", daemon=True)
        r.start()
        self.threads.append(r)
        if self.data_loss is not None:  # every replica notices a wipe within a second
            w = threading.Thread(target=self.data_loss.run_forever, args=(self.stop_event,),
                                 name="data-loss-watch", daemon=True)
            w.start()
            self.threads.append(w)
        self.start_outbox()
        if self.paging is not None:  # every replica may send: the outbox claims each page
            p = threading.Thread(target=run_paging, args=(self.paging, self.stop_event),
                                 name="paging", daemon=True)
            p.start()
            self.threads.append(p)
        if self.scheduler is not None:
            self.scheduler.start()
        if self.chat_app is not None:
            self.chat_app.start()

    def start_outbox(self) -> None:
        """The chat outbox's retry loop: what Slack refused (or spaced out) goes later;
        and the storms' table renders (issue 37), which the outbox then sends."""
        t = threading.Thread(target=self.flow.outbox.run, args=(self.stop_event, 1.0),
                             kwargs={"heartbeats": self.heartbeats}, name="chat-outbox",
                             daemon=True)
        t.start()
        self.threads.append(t)
        if self.flow.storms is not None:
            s = threading.Thread(target=self.flow.storms.run, args=(self.stop_event,),
                                 name="storm-tables", daemon=True)
            s.start()
            self.threads.append(s)

    def close(self) -> None:
        """Stop the consumer, hand the scheduler lease back, finish Slack work. Idempotent."""
        if self.stop_event.is_set():
            return
        self.stop_event.set()
        if self.flow.storms is not None:
            self.flow.storms.wake()
        if self.scheduler is not None:
            self.scheduler.stop()
        for t in self.threads:
            t.join(timeout=5)
        try:
            self.flow.outbox.flush(5)  # what can still go to Slack goes now
        except StorageError as exc:  # Redis away or refusing: the outbox keeps it for later
            log.warning("chat outbox not flushed at shutdown: %s", exc)
        self.diagnoses.shutdown(wait=True)
        if self.flow.actions is not None:
            self.flow.actions.shutdown(wait=True)
        if self.chat_app is not None:
            self.chat_app.close()
        self.flow.runner.close()


def check_sections(settings: Settings) -> None:
    """Validate every ``extra`` section now: a typo fails at start, not at 3 a.m."""
    from bot.config.gate import gate_settings
    from bot.config.inventory import diagnostics_settings
    from bot.domain.xid import xid_policy_from_extra
    from bot.extract.config import extract_settings
    from bot.remediation.options import options_from_extra
    from bot.schedule.jobs import load_sections

    diagnostics_settings(settings)
    options_from_extra(settings.extra)
    load_sections(settings.extra)
    extract_settings(settings.extra)
    xid_policy_from_extra(settings.extra)
    reconcile.reconcile_settings(settings.extra)
    gate_settings(settings)


def build_service(settings: Settings, *, runner: SSHRunner | None = None,
                  chat: ChatBackend | None = None, with_scheduler: bool = True) -> Service:
    """Assemble the bot; ``chat`` overrides ``settings.chat_backend`` (tests, demo)."""
    check_sections(settings)
    load_and_install(settings.extensions)  # the operators' ext.* probes, findings, actions
    stores = open_stores(settings.redis_url)
    audit = audit_sink(stores.audit())
    plugin = make_plugin(settings, stores=stores, audit=audit)
    chat = chat or plugin.backend()
    actions = ThreadPoolExecutor(max_workers=ACTION_WORKERS, thread_name_prefix="flow-action")
    flow = build_flow(settings, stores, runner or ParamikoPool(settings.ssh_defaults), chat,
                      actions=actions)
    flow.silences.set_maintenance(maintenance_from_settings(settings), "config")
    desk = PolicyApprovalDesk(flow.approvals, flow.policy, flow.events, audit=audit,
                              groups=plugin.groups(chat),
                              fleet={p.name: p for p in policies_from_settings(settings)})
    chat_app = _chat_app(settings, stores, flow, desk, plugin, chat)
    closers: list[Service] = []  # uvicorn's graceful shutdown runs this before it exits
    routes: list[BaseRoute] = list(chat_app.http_routes()) if chat_app is not None else []
    routes.append(Route(DIAGNOSE_ROUTE, DiagnoseEndpoint(settings, flow.runner).handle,
                        methods=["POST"]))
    heartbeats = Heartbeats()
    app = create_app(settings, stores, extra_routes=routes, store=flow.incidents,
                     on_shutdown=[partial(_close_all, closers)], heartbeats=heartbeats)
    scheduler = _scheduler(settings, stores, flow, desk) if with_scheduler else None
    watch = DataLossWatch(stores.epochs(clock=flow.clock), flow.incidents, flow.audit,
                          flow.publisher, opens=flow.incidents.ingest, clock=flow.clock)
    watch.start()  # joins the data epoch (or begins it on empty data): Redis must answer
    stores.on_incident_written(watch.seen)  # what this process opens is known as it opens
    flow.deliveries.watchers.append(watch.card_out)  # and each card its outbox delivered
    stores.before_incident_ingest(watch.current)  # a wipe noticed before an alert opens anew
    flow.events.on_lost_group = watch.lost_group
    service = Service(settings=settings, stores=stores, flow=flow, app=app, desk=desk,
                      chat_app=chat_app, scheduler=scheduler,
                      paging=build_paging(settings, stores), heartbeats=heartbeats,
                      data_loss=watch)
    closers.append(service)
    return service


def _chat_app(settings: Settings, stores: Stores, flow: Flow, desk: ApprovalDesk,
              plugin: ChatPlugin, chat: ChatBackend) -> ChatApp | None:
    """The backend's interactive side, given the slash commands and the Home tab's
    snapshot it may serve (a backend without one returns None)."""
    slash = FlowSlashHandlers(flow.incidents, tuple(settings.hosts), flow.diagnosis(),
                              flow.publisher, flow.jobs, flow.silences,
                              opens=flow.incidents.ingest,  # the alert receiver's path
                              digest_now=partial(_digest_now, settings, stores, flow),
                              decide=desk.incident, slurm=flow.slurm, stats=flow.stats,
                              glance=flow.hosts.glance)
    return plugin.app(chat, desk=desk, slash=slash, home=_fleet(settings, stores, flow))


def _digest_now(settings: Settings, stores: Stores, flow: Flow) -> None:
    """``/ir digest now``: the same runner as the scheduled digest, in the incident channel."""
    from bot.schedule.wiring import build_digest_runner  # matplotlib: only when asked

    out = Path(tempfile.gettempdir()) / "incident-bot-digests"
    build_digest_runner(settings, stores, flow.chat, out, runner=flow.runner).now(
        flow.publisher.channel)


def _fleet(settings: Settings, stores: Stores, flow: Flow) -> FleetSource:
    """The App Home's snapshot: open incidents, running extractions, the newest GPU samples
    of every sampled or inventory host (an inventory host's missing GPUs count as broken)."""
    expected = {name: host.gpus or 0 for name, host in settings.hosts.items()}
    return fleet_source(flow.incidents, stores.samples(), flow.jobs.list, expected,
                        flow.clock, maintenance=flow.silences.maintenance,
                        drained=flow.slurm.drained.cached if flow.slurm is not None else None)


def _scheduler(settings: Settings, stores: Stores, flow: Flow, desk: ApprovalDesk) -> Any:
    from bot.schedule.wiring import build_leader

    jobs = {"progress": partial(timers.poll_progress, flow.progress),
            "approval_expiry": partial(timers.expire_approvals, desk, flow.decide, flow.act,
                                       flow.reboots)}
    return build_leader(settings, stores, flow.chat, runner=flow.runner, extra_jobs=jobs)


def _reconciler(settings: Settings, flow: Flow, interrupted: reconcile.CutShort,
                heartbeats: Heartbeats, watch: DataLossWatch | None
                ) -> Callable[[threading.Event], None]:
    """The re-drive loop (issue 24): a stuck diagnosis is re-sent as ``incident.opened``
    (any replica's consumer claims it), a stuck action is read back from its host, never
    run again (verified if its effect is there, else failed with Retry). Each period this
    replica first checks Redis still holds its data and re-drives the steps a Redis
    refusal cut short here (issue 39)."""
    cfg = reconcile.reconcile_settings(settings.extra)
    sweep = partial(reconcile.reconcile_once, flow.flow_runner, flow.incidents, flow.audit,
                    flow.clock, rediagnose=lambda i: flow.events.publish("incident.opened", i),
                    settle_action=flow.act.settle_interrupted, max_attempts=cfg.max_attempts,
                    interrupted=interrupted)

    def local_pass() -> list[reconcile.Redrive]:
        if watch is not None:
            watch.check()
        reconcile.read_back_waiting(interrupted, flow.act.settle_interrupted)
        return sweep(only_interrupted=True)

    return partial(reconcile.run_forever, flow.incidents, sweep, every_s=cfg.every_s,
                   local_pass=local_pass, heartbeats=heartbeats)


def _close_all(services: list[Service]) -> None:
    for service in services:
        service.close()
