"""Incident-level decisions: Ack, Resolve, Snooze, Retry, Escalate (buttons and ``/ir``).

The approval desk checks who may decide; this hands the decision to the flow runner,
which applies it to the stored incident (``bot.domain.flow``), audits it with the user
and time, announces it on the events stream where others listen (``incident.ack`` stops
escalation) and re-renders the message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor
from enum import StrEnum

from bot.core import strings
from bot.domain.flow import (
    Acked,
    EscalateAsked,
    ResolveAsked,
    RetryClicked,
    SnoozeAsked,
    SnoozeEnded,
)
from bot.domain.lifecycle import IncidentState
from bot.flow.diagnose_step import Diagnoses
from bot.flow.runner import FlowRunner
from storage.incidents import IncidentStore


class Verb(StrEnum):
    ACK = "ack"
    RESOLVE = "resolve"
    SNOOZE = "snooze"
    RETRY = "retry"
    ESCALATE = "escalate"


class DecideStep:
    """Ack, Resolve, Snooze, Retry and Escalate: each an event decided by the flow runner
    (``bot.domain.flow``), which commits it, audits and announces it and re-renders."""

    def __init__(self, flow_runner: FlowRunner, incidents: IncidentStore, diagnose: Diagnoses,
                 actions: Executor | None = None, *, bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.flow_runner = flow_runner
        self.incidents = incidents
        self.diagnose = diagnose
        self.actions = actions  # a retried diagnosis runs here, off the click; None: inline
        self.bot_user = bot_user
        self.clock = clock

    def _off_thread(self, fn: Callable[[str], object], incident_id: str) -> None:
        if self.actions is None:
            fn(incident_id)
        else:
            self.actions.submit(fn, incident_id)

    def decide(self, verb: Verb, incident_id: str, user: str, duration_s: int = 0) -> str:
        """Apply one decision; returns the reply for the person (ephemeral)."""
        if self.incidents.get(incident_id) is None:
            return strings.INCIDENT_UNKNOWN.format(id=incident_id)
        at = self.clock()
        event = {Verb.ACK: Acked(at, user), Verb.RESOLVE: ResolveAsked(at, user),
                 Verb.SNOOZE: SnoozeAsked(at, user, duration_s),
                 Verb.RETRY: RetryClicked(at, user), Verb.ESCALATE: EscalateAsked(at, user)}[verb]
        handled = self.flow_runner.handle(incident_id, event)
        if handled.rediagnose:
            self._off_thread(self.diagnose.on_opened, incident_id)
        return handled.refused or handled.told or ""

    def wake_snoozed(self) -> list[str]:
        """Snoozes that ran out go back to the state they were snoozed from (scheduler job)."""
        woken = []
        for incident in self.incidents.list(open_only=True):
            snooze = incident.snooze
            if incident.state is not IncidentState.SNOOZED or (
                    snooze is not None and snooze.until > self.clock()):
                continue
            handled = self.flow_runner.handle(incident.id,
                                              SnoozeEnded(self.clock(), self.bot_user))
            if handled.incident.state is not IncidentState.SNOOZED:
                woken.append(incident.id)
        return woken
