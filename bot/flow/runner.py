"""The flow runner: one event at a time, the incident loaded once, decided, committed once.

``FlowRunner.handle(incident_id, event)``: ``storage/incidents.py`` ``IncidentStore.commit``
WATCHes the incident, reads it once and calls ``bot/domain/flow.py`` ``decide`` (pure) on
it, then writes the new record in one MULTI/EXEC (with the transition's audit line, its
in-flight owner, the resolved event and the withdrawals when the state changed; another
writer in between makes it read and decide again). Then the effects are applied, in
order, by small executors: the message posted or edited (``Publisher``), a reply or the
result line in the thread, the other pending approvals withdrawn and approvals attached to
their message (``Plans``), an audit
entry, an announcement on the events stream, the closing note, and the diagnosis
(``Diagnoser``), whose result comes back as the next event. An approved action is not run
here: it is handed back (``Handled.runs``) to the step that owns the action executor, and
what it observes comes back through ``handle`` as events too; so is what the reconciler
does after an abandoned step (``Handled.sweep``: re-diagnose, read back, drop; the
runner itself drops an in-flight entry that outlived its state or its incident).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from bot.chat.transcript import transcript_status
from bot.core import strings
from bot.core.errors import log_internal
from bot.domain.action_result import ActionResult
from bot.domain.flow import (
    Announce,
    AttachApprovals,
    Audit,
    ClosingNote,
    DiagnosisFailed,
    Effect,
    FlowEvent,
    PostMessage,
    Rediagnose,
    Refused,
    ReplyInThread,
    RunAction,
    RunDiagnosis,
    SayResult,
    StepRedriven,
    SweepNext,
    Then,
    Told,
    Transitioned,
    WithdrawPending,
    decide,
)
from bot.domain.incident import Incident
from bot.domain.lifecycle import IllegalTransition
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from storage.audit import AuditLog
from storage.connection import refusal
from storage.events import IncidentEvents
from storage.incidents import IncidentStore, UnknownIncident
from storage.inflight import Inflight

log = logging.getLogger(__name__)


class DiagnosisRun(Protocol):
    """What runs a diagnosis for the runner (``bot/flow/diagnose_step.py`` ``Diagnoser``):
    the incident in, the event that says how it went out."""

    def run(self, incident: Incident, evidence: bool) -> FlowEvent: ...


def commands_text(result: ActionResult) -> str:
    """The commands an action ran (only those: a step skipped because its effect already
    held never ran) and what verify saw, for the thread."""
    lines = [f"$ {c.command}  → {transcript_status(c)} in {c.duration_s:.2f}s"
             for c in result.commands if c.ran]
    if result.verification is not None:
        lines.append(f"verify: {result.verification.detail}")
    return "\n".join(lines) or strings.FLOW_NO_COMMANDS


@dataclass(frozen=True)
class Handled:
    """What handling one event (and the events its effects led to) came to."""

    incident: Incident  # as last committed
    refused: str | None = None  # said to the person who asked: nothing happened
    told: str | None = None  # said to the person who asked: done
    runs: tuple[RunAction, ...] = ()  # approved actions for the action executor
    rediagnose: bool = False  # diagnose again, off the click
    sweep: tuple[SweepNext, ...] = ()  # what the reconciler does next


class FlowRunner:
    """Per event: load once, ``decide``, commit once, apply the effects."""

    def __init__(self, incidents: IncidentStore, publisher: Publisher, plans: Plans,
                 audit: AuditLog, events: IncidentEvents, diagnoser: DiagnosisRun, *,
                 closing_note: Callable[[str], str | None] | None = None,
                 bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.incidents = incidents
        self.publisher = publisher
        self.plans = plans
        self.audit = audit
        self.events = events
        self.diagnoser = diagnoser
        self.closing_note = closing_note  # the postmortem's summary, posted once on resolve
        self.bot_user = bot_user
        self.clock = clock

    def handle(self, incident_id: str, event: FlowEvent, *,
               expect: Inflight | None = None) -> Handled:
        """Decide ``event`` on the stored incident, commit, apply the effects. Raises what
        ``decide`` raises (``IllegalTransition``, ``StepTaken``): nothing was written.
        ``expect``: the in-flight entry the reconciler saw (``StepTaken`` when it moved);
        it is dropped when its incident is gone (``UnknownIncident`` still raised) or
        elsewhere (``SweepNext`` says drop)."""
        try:
            incident, effects = self.incidents.commit(incident_id, lambda i: decide(i, event),
                                                      expect=expect)
        except UnknownIncident:
            if expect is not None:
                self.incidents.drop_stale(expect)
            raise
        done = Handled(incident)
        for effect in effects:
            done = self._apply(done, effect, expect)
        return done

    def _apply(self, done: Handled, effect: Effect, expect: Inflight | None = None) -> Handled:
        incident = done.incident
        if isinstance(effect, Transitioned | StepRedriven):
            return done  # written with the record
        if isinstance(effect, PostMessage):
            self._post(incident, effect)
        elif isinstance(effect, ReplyInThread):
            self.publisher.reply(incident, effect.text, effect.code, purpose=effect.purpose)
        elif isinstance(effect, SayResult):
            self.publisher.reply(incident, effect.result.summary, commands_text(effect.result))
        elif isinstance(effect, WithdrawPending):
            self.plans.withdraw_pending(incident, effect.actor, keep=effect.keep,
                                        reason=effect.reason, only=effect.only)
        elif isinstance(effect, AttachApprovals):
            self.plans.attach_message(effect.approval_ids, effect.channel, effect.ts)
        elif isinstance(effect, Audit):
            self.audit.append(incident.id, effect.actor, effect.action, dict(effect.detail))
        elif isinstance(effect, Announce):
            self.audit.append(incident.id, effect.user, effect.event,
                              {"at": effect.at, **effect.detail})
            self.events.publish(effect.event, incident.id, user=effect.user, **effect.detail)
        elif isinstance(effect, ClosingNote):
            self._closing_note(incident)
        elif isinstance(effect, RunDiagnosis):
            return self._diagnose(done, effect)
        elif isinstance(effect, RunAction):
            return replace(done, runs=(*done.runs, effect))
        elif isinstance(effect, Rediagnose):
            return replace(done, rediagnose=True)
        elif isinstance(effect, SweepNext):
            if effect.then is Then.DROP and expect is not None:
                self.incidents.drop_stale(expect)  # the entry outlived its state
            return replace(done, sweep=(*done.sweep, effect))
        elif isinstance(effect, Refused):
            return replace(done, refused=effect.text)
        elif isinstance(effect, Told):
            return replace(done, told=effect.text)
        else:
            raise TypeError(f"no executor for {type(effect).__name__}")
        return done

    def _post(self, incident: Incident, effect: PostMessage) -> None:
        """The message from the stored incident; the early alert card is best effort (its
        failure is logged and the diagnosis goes on: its outcome posts the message)."""
        if effect.required:
            self.publisher.publish(incident.id, evidence=effect.evidence)
            return
        try:
            self.publisher.publish(incident.id, evidence=effect.evidence)
        except Exception as exc:
            if refusal(exc) is not None:  # Redis refused: the diagnosis's end posts it
                log.warning("the alert card of %s waits: Redis refused: %s", incident.id, exc)
            elif isinstance(exc, UnknownIncident):  # wiped under it: the data-loss watch says
                log.warning("the alert card of %s: the incident is gone from Redis",
                            incident.id)
            else:
                log_internal(exc, f"the alert card of {incident.id}")

    def _diagnose(self, done: Handled, effect: RunDiagnosis) -> Handled:
        """The diagnosis, then its outcome as the next event. Never silent: an error of ours
        anywhere in it (target, probes, planning, rendering, storing, posting) leaves the
        incident ``diagnosis_failed`` with the error id and a Retry button, and says so. A
        Redis refusal is not an error of ours: raised as it is, the incident left
        ``diagnosing`` for the reconciler to re-drive once Redis takes writes. Nor is an
        incident gone with Redis's data (a wipe mid-diagnosis): raised for the consumer to
        log as such; the data-loss watch says it in chat and re-opens what it held."""
        incident = done.incident
        try:
            outcome = self.diagnoser.run(incident, effect.evidence)
        except Exception as exc:
            return self._diagnosis_error(incident, exc)
        try:
            return self.handle(incident.id, outcome)
        except IllegalTransition as exc:  # StepTaken too
            # the incident moved on while this diagnosis ran (a re-driven diagnosis that
            # finished after the first one, an approval clicked meanwhile): stale, not an
            # error of ours, and nothing of it is written over the newer state
            log.info("the diagnosis of %s ended after it moved on: %s", incident.id, exc)
            return Handled(self.incidents.require(incident.id))
        except Exception as exc:
            return self._diagnosis_error(incident, exc)

    def _diagnosis_error(self, incident: Incident, exc: Exception) -> Handled:
        """An error of ours in a diagnosis: ``diagnosis_failed`` with its error id."""
        if refusal(exc) is not None or isinstance(exc, UnknownIncident):
            raise exc  # Redis said "not now" or lost it, not a bug of ours (issue 39)
        error_id = log_internal(exc, f"diagnosis of {incident.id}")
        current = self.incidents.require(incident.id)
        self.plans.withdraw_pending(current, self.bot_user, reason="diagnosis failed")
        failed = DiagnosisFailed(self.clock(), self.bot_user, error_id)
        return self.handle(incident.id, failed)

    def _closing_note(self, incident: Incident) -> None:
        """The timeline in the thread when an incident resolves (one replica: the group)."""
        text = self.closing_note(incident.id) if self.closing_note is not None else None
        if text:
            self.publisher.reply(incident, text)
