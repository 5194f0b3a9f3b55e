"""Incident-level decisions: Ack, Resolve, Snooze, Retry, Escalate (buttons and ``/ir``).

The approval desk checks who may decide; this applies the decision to the stored
incident, audits it with the user and time, announces it on the events stream where
others listen (``incident.ack`` stops escalation) and re-renders the message.
"""

from __future__ import annotations

import time
from dataclasses import replace
from enum import StrEnum

from bot.core import strings
from bot.domain.incident import Incident
from bot.domain.incident_record import Snooze
from bot.domain.lifecycle import SNOOZABLE, IncidentState, can_transition
from bot.flow.context import FlowContext
from bot.flow.diagnose_step import on_incident_opened
from bot.flow.message import publish
from bot.flow.plans import withdraw_pending
from bot.flow.thread import post_in_thread
from storage.events import IncidentEvents

RETRYABLE = frozenset({IncidentState.DIAGNOSIS_FAILED, IncidentState.ACTION_FAILED,
                       IncidentState.DENIED, IncidentState.EXPIRED, IncidentState.NO_ACTION})
MAX_SNOOZE_S = 7 * 86400


class Verb(StrEnum):
    ACK = "ack"
    RESOLVE = "resolve"
    SNOOZE = "snooze"
    RETRY = "retry"
    ESCALATE = "escalate"


def decide(ctx: FlowContext, verb: Verb, incident_id: str, user: str,
           duration_s: int = 0) -> str:
    """Apply one decision; returns the reply for the person (ephemeral)."""
    incident = ctx.incidents.get(incident_id)
    if incident is None:
        return strings.INCIDENT_UNKNOWN.format(id=incident_id)
    handler = {Verb.ACK: _ack, Verb.RESOLVE: _resolve, Verb.SNOOZE: _snooze,
               Verb.RETRY: _retry, Verb.ESCALATE: _escalate}[verb]
    reply = handler(ctx, incident, user, duration_s)
    if reply is None:
        return strings.INCIDENT_CANNOT.format(id=incident.id, state=incident.state.value,
                                              verb=_past(verb))
    return reply


def _past(verb: Verb) -> str:
    return {Verb.ACK: "acknowledged", Verb.RESOLVE: "resolved", Verb.SNOOZE: "snoozed",
            Verb.RETRY: "retried", Verb.ESCALATE: "escalated"}[verb]


def _record(ctx: FlowContext, incident: Incident, user: str, event: str, **detail: object) -> None:
    ctx.audit.append(incident.id, user, event, {"at": ctx.clock(), **detail})
    IncidentEvents(ctx.redis).publish(event, incident.id, user=user, **detail)


def _ack(ctx: FlowContext, incident: Incident, user: str, _d: int) -> str | None:
    if not incident.is_open:
        return None
    if not incident.acked_by:
        ctx.incidents.update(incident.id, lambda i: replace(i, acked_by=user))
        _record(ctx, incident, user, "incident.ack")
        publish(ctx, incident.id)
    return strings.INCIDENT_ACKED.format(id=incident.id)


def _resolve(ctx: FlowContext, incident: Incident, user: str, _d: int) -> str | None:
    if not can_transition(incident.state, IncidentState.RESOLVED):
        return None
    ctx.incidents.update(incident.id, lambda i: replace(i, resolved_by=user, snooze=None))
    withdraw_pending(ctx, incident, user, reason="incident resolved")
    ctx.incidents.transition(incident.id, IncidentState.RESOLVED, user, "resolved by a person")
    _record(ctx, incident, user, "incident.resolve")
    publish(ctx, incident.id)
    return strings.INCIDENT_RESOLVED.format(id=incident.id)


def _snooze(ctx: FlowContext, incident: Incident, user: str, duration_s: int) -> str | None:
    if incident.state not in SNOOZABLE or not 0 < duration_s <= MAX_SNOOZE_S:
        return None
    until = ctx.clock() + duration_s
    snooze = Snooze(user, until, incident.state.value)
    ctx.incidents.update(incident.id, lambda i: replace(i, snooze=snooze))
    ctx.incidents.transition(incident.id, IncidentState.SNOOZED, user, f"snoozed for {duration_s}s")
    _record(ctx, incident, user, "incident.snoozed", until=until, duration_s=duration_s)
    publish(ctx, incident.id)
    return strings.INCIDENT_SNOOZED.format(id=incident.id, until=_utc(until))


def _retry(ctx: FlowContext, incident: Incident, user: str, _d: int) -> str | None:
    if incident.state not in RETRYABLE:
        return None
    withdraw_pending(ctx, incident, user, reason="diagnosing again")
    _record(ctx, incident, user, "incident.retry")
    ctx.run_off_thread(on_incident_opened, ctx, incident.id)
    return strings.INCIDENT_RETRYING.format(id=incident.id)


def _escalate(ctx: FlowContext, incident: Incident, user: str, _d: int) -> str | None:
    if not incident.is_open:
        return None
    ctx.incidents.update(incident.id, lambda i: replace(i, escalated_by=user))
    _record(ctx, incident, user, "incident.escalate")
    post_in_thread(ctx, incident, strings.VIEW_ESCALATED.format(who=f"<@{user}>"))
    publish(ctx, incident.id)
    return strings.INCIDENT_ESCALATED.format(id=incident.id)


def wake_snoozed(ctx: FlowContext) -> list[str]:
    """Snoozes that ran out go back to the state they were snoozed from (scheduler job)."""
    woken = []
    for incident in ctx.incidents.list(open_only=True):
        snooze = incident.snooze
        if incident.state is not IncidentState.SNOOZED or (
                snooze is not None and snooze.until > ctx.clock()):
            continue
        back = IncidentState(snooze.from_state if snooze is not None
                             else IncidentState.AWAITING_APPROVAL.value)
        ctx.incidents.update(incident.id, lambda i: replace(i, snooze=None))
        ctx.incidents.transition(incident.id, back, ctx.bot_user, "snooze ended")
        publish(ctx, incident.id)
        woken.append(incident.id)
    return woken


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))
