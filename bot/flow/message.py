"""The one renderer of the incident message: read everything from Redis, render, send.

Every post and every edit goes through ``publish``. It takes the next render sequence
number *before* reading the stored state, so a higher number never shows an older state;
the Slack backend drops a render older than the last applied one. Nothing is rendered
from a click's payload.
"""

from __future__ import annotations

from bot.chat.base import ChatMessage, MessageRef
from bot.chat.render import StepResult, render_incident
from bot.domain.findings import Diagnosis
from bot.domain.incident import Incident
from bot.flow.context import FlowContext
from bot.flow.plans import stored_plans
from bot.flow.thread import message_ref, where_to_post


def render_stored(ctx: FlowContext, incident: Incident, seq: int = 0) -> ChatMessage | None:
    """The incident's message as its stored state says (None before its diagnosis)."""
    meta = incident.meta
    if "diagnosis" not in meta:
        return None
    plans, revert = stored_plans(incident)
    ids = [p.approval_id for p in plans] + ([revert.approval_id] if revert else [])
    approvals = {i: a for i in ids if (a := ctx.approvals.get(i)) is not None}
    results = [StepResult(bool(r["ok"]), r["text"]) for r in meta.get("results", [])]
    return render_incident(incident, Diagnosis.from_dict(meta["diagnosis"]), plans, approvals,
                           results, revert, seq=seq)


def publish(ctx: FlowContext, incident_id: str) -> MessageRef | None:
    """Post the incident's message the first time, edit it in place after that."""
    seq = ctx.renders.next_seq(incident_id)
    incident = ctx.incidents.require(incident_id)
    message = render_stored(ctx, incident, seq)
    if message is None:
        return None
    ref = message_ref(incident)
    if ref is not None:
        ctx.chat.update(ref, message)
        return ref
    return _first_post(ctx, incident, message)


def _first_post(ctx: FlowContext, incident: Incident, message: ChatMessage) -> MessageRef:
    channel, parent_ref = where_to_post(ctx, incident)
    ref = ctx.chat.post(channel, message, thread=parent_ref)
    plans, _ = stored_plans(incident)
    for plan in plans:
        ctx.approvals.attach_message(plan.approval_id, ref.channel, ref.ts)
    chat = {"channel": ref.channel, "ts": ref.ts,
            "thread_ts": parent_ref.ts if parent_ref is not None else ref.ts}
    ctx.incidents.set_meta(incident.id, chat=chat)
    return ref
