"""The flow assembled once: every store and step built here and handed to the steps that
use them (constructor injection, as rq's ``Worker`` takes its queues and connection).

``bot/service.py`` and the demo call ``build_flow`` with the ``Stores`` they opened; no
step receives ``Settings``, the stores bundle or a Redis client: this function unpacks
the settings into plain values and builds each store once, like
errbot's backends unpack their config. ``Flow`` is what the composition root keeps to
start loops, wire the chat app and close the executor; steps never take it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from bot.chat.base import ChatBackend
from bot.chat.outbox import ChatOutbox
from bot.config.gate import repeat_window_s
from bot.config.policy import policy_from_settings
from bot.config.settings import Settings
from bot.core import fmt, strings
from bot.digest.postmortem_render import to_thread_text
from bot.digest.postmortem_source import load_postmortem, recent_postmortems
from bot.digest.response_stats import response_stats, stats_lines
from bot.domain.approval import ApprovalPolicy
from bot.domain.xid import xid_policy_from_extra
from bot.flow.act_step import ActStep
from bot.flow.approve_step import ApproveStep
from bot.flow.clicks import Clicks
from bot.flow.consumer import Consumer
from bot.flow.decide_step import DecideStep
from bot.flow.delivery import CardDeliveries
from bot.flow.diagnose_step import Diagnoser, DiagnoseStep
from bot.flow.followups import Followups
from bot.flow.hosts import Hosts
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.flow.policy_step import PolicyStep
from bot.flow.progress_step import ProgressStep
from bot.flow.reboot_step import RebootStep
from bot.flow.reconcile import reconcile_settings
from bot.flow.repeat_watch import RepeatWatch
from bot.flow.runner import FlowRunner
from bot.flow.slurm_step import SlurmStep
from bot.flow.storm import Storms
from bot.jobs.book import JobBook
from bot.remediation.options import options_from_extra
from bot.remediation.policy_gate import gate_from_settings
from bot.schedule.escalation import can_escalate
from bot.ssh.base import SSHRunner
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.events import IncidentEvents
from storage.incidents import IncidentStore
from storage.renders import RenderLedger
from storage.silences import SilenceStore
from storage.stores import Stores

BOT_USER = "incident-bot"


@dataclass(frozen=True)
class Flow:
    """The assembled flow: its stores, its steps, and the executor actions run on."""

    incidents: IncidentStore
    approvals: ApprovalStore
    audit: AuditLog
    events: IncidentEvents
    silences: SilenceStore
    renders: RenderLedger
    policy: ApprovalPolicy
    jobs: JobBook
    chat: ChatBackend
    outbox: ChatOutbox
    deliveries: CardDeliveries  # the outbox's ``on_delivered``: where each card went
    runner: SSHRunner
    hosts: Hosts
    publisher: Publisher
    plans: Plans
    diagnose: DiagnoseStep  # without the policies: the reboot step's re-diagnosis
    diagnosis_step: DiagnoseStep  # with them: the consumer, Retry, ``/ir diag``
    followups: Followups
    reboots: RebootStep
    act: ActStep
    approve: ApproveStep
    decide: DecideStep
    progress: ProgressStep
    actions: Executor | None
    clock: Callable[[], float]
    flow_runner: FlowRunner
    closing_note: Callable[[str], str | None] | None = None
    policies: PolicyStep | None = None
    stats: Callable[[int], str] | None = None
    slurm: SlurmStep | None = None
    storms: Storms | None = None  # issue 37: its render loop is started by ``bot/service.py``

    def consumer(self, diagnoses: Executor | None = None, workers: int = 0) -> Consumer:
        """A new consumer loop on the events stream (one per thread); ``diagnoses`` runs
        the diagnoses it starts, ``workers`` at once (None: inline)."""
        return Consumer(self.events, self.diagnosis(), self.publisher, self.flow_runner,
                        diagnoses, workers, clicks=self.clicks(), bot_user=BOT_USER,
                        clock=self.clock)

    def diagnosis(self) -> DiagnoseStep:
        """What ``/ir diag`` runs: the diagnosis, then what the fleet policies do with it."""
        return self.diagnosis_step

    def clicks(self) -> Clicks:
        """What the consumer does with a click event the approval desk queued."""
        return Clicks(self.approvals, self.incidents, self.approve, self.decide, self.chat,
                      self.publisher.channel)


def build_flow(settings: Settings, stores: Stores, runner: SSHRunner, chat: ChatBackend, *,
               channel: str | None = None, actions: Executor | None = None,
               clock: Callable[[], float] = time.time,
               progress_interval_s: float = 2.0) -> Flow:
    """Every store and step of the flow, from ``settings`` and ``stores``, built once."""
    job_store = stores.jobs()  # over RQ's bytes client: jobs, links and resumes
    jobs = JobBook(job_store)
    incidents = stores.incidents(group_wait_s=settings.alerts.group_wait_s,
                                 deadlines=reconcile_settings(settings.extra).deadlines(),
                                 xid_policy=xid_policy_from_extra(settings.extra))
    approvals, audit = stores.approvals(), stores.audit()
    policy = policy_from_settings(settings)
    options = options_from_extra(settings.extra, jobs=job_store)
    renders = stores.renders()
    hosts = Hosts(settings, runner, jobs, options, clock)
    sent = stores.chat_outbox()
    outbox = ChatOutbox(sent, chat, clock)  # its deliveries reach the flow below
    where = channel or settings.slack.channel or "incidents"
    publisher = Publisher(incidents, approvals, renders, outbox, where,
                          oncall=settings.slack.oncall, runbooks=settings.runbooks, clock=clock,
                          can_escalate=can_escalate(settings, where))
    storms = _storms(settings, stores, incidents, outbox, renders, publisher, clock)
    gate = gate_from_settings(settings, stores, clock=clock) if settings.policies else None
    plans = Plans(incidents, approvals, audit, policy, gate=gate, bot_user=BOT_USER, clock=clock)
    events = stores.events()
    closing_note = _postmortem_note(incidents, audit)
    history = stores.health_history(clock=clock)  # passed gates, faults seen, the RMA list
    repeats = RepeatWatch(history, audit, window_s=repeat_window_s(settings), clock=clock,
                          bot_user=BOT_USER)
    diagnoser = Diagnoser(hosts, plans, publisher, bot_user=BOT_USER, clock=clock,
                          repeats=repeats)
    flow_runner = FlowRunner(incidents, publisher, plans, audit, events, diagnoser,
                             closing_note=closing_note, bot_user=BOT_USER, clock=clock)
    # a delivered card is an event (CardDelivered): the chat layer never writes the incident
    deliveries = CardDeliveries(flow_runner, outbox, bot_user=BOT_USER, clock=clock)
    outbox.on_delivered = deliveries.delivered
    diagnose = DiagnoseStep(flow_runner, bot_user=BOT_USER, clock=clock)
    followups = Followups(flow_runner, incidents, plans, publisher, audit, runner, settings,
                          gate_need_mib=options.gate_need_mib, bot_user=BOT_USER,
                          history=history)
    slurm = SlurmStep(flow_runner, incidents, hosts, plans, publisher, followups, audit,
                      probe_timeout_s=options.probe_timeout_s, bot_user=BOT_USER, clock=clock)
    reboots = RebootStep(flow_runner, incidents, hosts, runner, plans, publisher, audit, diagnose,
                         probe_timeout_s=options.probe_timeout_s, bot_user=BOT_USER, clock=clock,
                         slurm=slurm)
    act = ActStep(flow_runner, incidents, hosts, plans, publisher, followups, reboots, runner,
                  audit, jobs, options, bot_user=BOT_USER, clock=clock, slurm=slurm)
    approve = ApproveStep(flow_runner, act, actions, bot_user=BOT_USER, clock=clock)
    policies = (PolicyStep(incidents, approvals, audit, publisher, approve, clock=clock)
                if gate is not None else None)
    diagnosis_step = DiagnoseStep(flow_runner, policies=policies, bot_user=BOT_USER,
                                  clock=clock)
    return Flow(
        incidents=incidents, approvals=approvals, audit=audit, events=events,
        silences=stores.silences(), renders=renders, policy=policy, jobs=jobs, chat=chat,
        outbox=outbox, deliveries=deliveries,
        runner=runner, hosts=hosts, publisher=publisher, plans=plans, diagnose=diagnose,
        diagnosis_step=diagnosis_step,
        followups=followups, reboots=reboots, act=act, slurm=slurm,
        approve=approve,
        decide=DecideStep(flow_runner, incidents, diagnosis_step, actions,
                          bot_user=BOT_USER, clock=clock),
        progress=ProgressStep(flow_runner, incidents, jobs, publisher, audit,
                              interval_s=progress_interval_s, bot_user=BOT_USER, clock=clock),
        actions=actions, clock=clock, flow_runner=flow_runner, closing_note=closing_note,
        stats=_stats_report(incidents, audit, clock), policies=policies, storms=storms)


def _storms(settings: Settings, stores: Stores, incidents: IncidentStore, outbox: ChatOutbox,
            renders: RenderLedger, publisher: Publisher,
            clock: Callable[[], float]) -> Storms | None:
    """Storms (issue 37) wired into the publisher (placement of first messages) and the
    outbox (a member's card goes in the storm's thread); None when turned off."""
    cfg = settings.slack.storm
    if cfg.per_minute <= 0:
        return None
    storms = Storms(stores.storms(threshold=cfg.per_minute, quiet_s=cfg.quiet_s), incidents,
                    outbox, renders, clock=clock)
    publisher.storms = storms
    outbox.placement = storms.placement
    return storms


def _stats_report(incidents: IncidentStore, audit: AuditLog,
                  clock: Callable[[], float]) -> Callable[[int], str]:
    """``/ir stats``: MTTA, MTTR and the one-click share per kind and per host, from the
    postmortems of the incidents opened in the window (the audit trail is the source)."""
    def report(window_s: int) -> str:
        period = fmt.duration(window_s)
        found = recent_postmortems(incidents, audit, clock() - window_s)
        if not found:
            return strings.STATS_NONE.format(period=period)
        return "\n".join([strings.STATS_HEAD.format(period=period), strings.STATS_BY_KIND,
                          *stats_lines(response_stats(found)), strings.STATS_BY_HOST,
                          *stats_lines(response_stats(found, key=lambda pm: pm.host))])

    return report


def _postmortem_note(incidents: IncidentStore,
                     audit: AuditLog) -> Callable[[str], str | None]:
    """The resolved incident's timeline, short, for its thread (None when there is none)."""
    def note(incident_id: str) -> str | None:
        postmortem = load_postmortem(incidents, audit, incident_id)
        return to_thread_text(postmortem) if postmortem is not None else None

    return note
