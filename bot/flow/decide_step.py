"""Incident-level decisions: Ack, Resolve, Snooze, Retry, Escalate (buttons and ``/ir``).

The approval desk checks who may decide; this applies the decision to the stored
incident, audits it with the user and time, announces it on the events stream where
others listen (``incident.ack`` stops escalation) and re-renders the message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import replace
from enum import StrEnum

from bot.core import strings
from bot.domain.incident import Incident
from bot.domain.incident_record import Snooze
from bot.domain.lifecycle import MAX_SNOOZE_S, SNOOZABLE, IncidentState, can_transition
from bot.flow.diagnose_step import Diagnoses
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from storage.audit import AuditLog
from storage.events import IncidentEvents
from storage.incidents import IncidentStore

RETRYABLE = frozenset({IncidentState.DIAGNOSIS_FAILED, IncidentState.ACTION_FAILED,
                       IncidentState.DENIED, IncidentState.EXPIRED, IncidentState.NO_ACTION})


class Verb(StrEnum):
    ACK = "ack"
    RESOLVE = "resolve"
    SNOOZE = "snooze"
    RETRY = "retry"
    ESCALATE = "escalate"


class DecideStep:
    """Ack, Resolve, Snooze, Retry and Escalate applied to the stored incident."""

    def __init__(self, incidents: IncidentStore, plans: Plans, publisher: Publisher,
                 audit: AuditLog, events: IncidentEvents, diagnose: Diagnoses,
                 actions: Executor | None = None, *, bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.incidents = incidents
        self.plans = plans
        self.publisher = publisher
        self.audit = audit
        self.events = events
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
        incident = self.incidents.get(incident_id)
        if incident is None:
            return strings.INCIDENT_UNKNOWN.format(id=incident_id)
        handler = {Verb.ACK: self._ack, Verb.RESOLVE: self._resolve, Verb.SNOOZE: self._snooze,
                   Verb.RETRY: self._retry, Verb.ESCALATE: self._escalate}[verb]
        reply = handler(incident, user, duration_s)
        if reply is None:
            return strings.INCIDENT_CANNOT.format(id=incident.id, state=incident.state.value,
                                                  verb=_past(verb))
        return reply

    def _record(self, incident: Incident, user: str, event: str, **detail: object) -> None:
        self.audit.append(incident.id, user, event, {"at": self.clock(), **detail})
        self.events.publish(event, incident.id, user=user, **detail)

    def _ack(self, incident: Incident, user: str, _d: int) -> str | None:
        if not incident.is_open:
            return None
        if not incident.acked_by:
            self.incidents.update(incident.id, lambda i: replace(i, acked_by=user))
            self._record(incident, user, "incident.ack")
            self.publisher.publish(incident.id)
        return strings.INCIDENT_ACKED.format(id=incident.id)

    def _resolve(self, incident: Incident, user: str, _d: int) -> str | None:
        if not can_transition(incident.state, IncidentState.RESOLVED):
            return None
        self.incidents.update(incident.id, lambda i: replace(i, resolved_by=user, snooze=None))
        # the transition withdraws its pending approvals in the same EXEC (by this user)
        self.incidents.transition(incident.id, IncidentState.RESOLVED, user, "resolved by a person")
        self._record(incident, user, "incident.resolve")
        self.publisher.publish(incident.id)
        return strings.INCIDENT_RESOLVED.format(id=incident.id)

    def _snooze(self, incident: Incident, user: str, duration_s: int) -> str | None:
        if incident.state not in SNOOZABLE or not 0 < duration_s <= MAX_SNOOZE_S:
            return None
        until = self.clock() + duration_s
        snooze = Snooze(user, until, incident.state.value)
        self.incidents.update(incident.id, lambda i: replace(i, snooze=snooze))
        self.incidents.transition(incident.id, IncidentState.SNOOZED, user,
                                  f"snoozed for {duration_s}s")
        self._record(incident, user, "incident.snoozed", until=until, duration_s=duration_s)
        self.publisher.publish(incident.id)
        return strings.INCIDENT_SNOOZED.format(id=incident.id, until=_utc(until))

    def _retry(self, incident: Incident, user: str, _d: int) -> str | None:
        if incident.state not in RETRYABLE:
            return None
        self.plans.withdraw_pending(incident, user, reason="diagnosing again")
        self._record(incident, user, "incident.retry")
        self._off_thread(self.diagnose.on_opened, incident.id)
        return strings.INCIDENT_RETRYING.format(id=incident.id)

    def _escalate(self, incident: Incident, user: str, _d: int) -> str | None:
        if not incident.is_open:
            return None
        self.incidents.update(incident.id, lambda i: replace(i, escalated_by=user))
        self._record(incident, user, "incident.escalate")
        self.publisher.reply(incident, strings.VIEW_ESCALATED.format(who=f"<@{user}>"))
        self.publisher.publish(incident.id)
        return strings.INCIDENT_ESCALATED.format(id=incident.id)

    def wake_snoozed(self) -> list[str]:
        """Snoozes that ran out go back to the state they were snoozed from (scheduler job)."""
        woken = []
        for incident in self.incidents.list(open_only=True):
            snooze = incident.snooze
            if incident.state is not IncidentState.SNOOZED or (
                    snooze is not None and snooze.until > self.clock()):
                continue
            back = IncidentState(snooze.from_state if snooze is not None
                                 else IncidentState.AWAITING_APPROVAL.value)
            self.incidents.update(incident.id, lambda i: replace(i, snooze=None))
            self.incidents.transition(incident.id, back, self.bot_user, "snooze ended")
            self.publisher.publish(incident.id)
            woken.append(incident.id)
        return woken


def _past(verb: Verb) -> str:
    return {Verb.ACK: "acknowledged", Verb.RESOLVE: "resolved", Verb.SNOOZE: "snoozed",
            Verb.RETRY: "retried", Verb.ESCALATE: "escalated"}[verb]


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))
