"""The one renderer of the incident message: read everything from Redis, render, send.

Every post and every edit goes through ``publish``. It takes the next render sequence
number *before* reading the stored state, so a higher number never shows an older state;
the Slack backend drops a render older than the last applied one. Nothing is rendered
from a click's payload.
"""

from __future__ import annotations

from dataclasses import replace

from bot.chat.base import ChatMessage, MessageRef
from bot.chat.evidence import raw_evidence, with_outputs
from bot.chat.render import render_incident, thread_evidence
from bot.core import strings
from bot.domain.incident import Incident
from bot.domain.incident_record import ChatRefs
from bot.flow.context import FlowContext
from bot.flow.thread import message_ref, thread_ref, where_to_post


def render_stored(ctx: FlowContext, incident: Incident, seq: int = 0) -> ChatMessage | None:
    """The incident's message as its stored state says (None before its diagnosis)."""
    if incident.diagnosis is None:
        return None
    plans, revert = list(incident.plans), incident.revert_plan
    ids = [p.approval_id for p in plans] + ([revert.approval_id] if revert else [])
    approvals = {i: a for i in ids if (a := ctx.approvals.get(i)) is not None}
    # ages are as of the stored state's last change, never the render's clock: the same
    # state renders the same message on every replica and at every retry
    as_of = incident.updated or ctx.clock()
    return render_incident(incident, incident.diagnosis, plans, approvals,
                           incident.results, revert, seq=seq, now=as_of,
                           oncall=ctx.settings.slack.oncall)


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
    for plan in incident.plans:
        ctx.approvals.attach_message(plan.approval_id, ref.channel, ref.ts)
    chat = ChatRefs(ref.channel, ref.ts, parent_ref.ts if parent_ref is not None else ref.ts)
    incident = ctx.incidents.update(incident.id, lambda i: replace(i, chat=chat))
    _post_evidence(ctx, incident, MessageRef(ref.channel, chat.thread_ts))
    return ref


def _post_evidence(ctx: FlowContext, incident: Incident, thread: MessageRef) -> None:
    """The per-GPU evidence table, once, as the first reply under the new message."""
    if incident.diagnosis is None:
        return
    sections = thread_evidence(incident.diagnosis)
    if sections:
        ctx.chat.post(thread.channel, ChatMessage(text=sections[0].text, sections=sections),
                      thread=thread)


def post_raw_evidence(ctx: FlowContext, incident_id: str) -> str:
    """Raw probe output on demand (button or ``/ir evidence``), as a reply in the thread;
    the answer for the person who asked."""
    incident = ctx.incidents.get(incident_id)
    if incident is None:
        return strings.INCIDENT_UNKNOWN.format(id=incident_id)
    if incident.diagnosis is None:
        return strings.MSG_EVIDENCE_NOT_YET.format(id=incident_id)
    ref = thread_ref(incident)
    if ref is None:
        return strings.MSG_EVIDENCE_NO_THREAD.format(id=incident_id)
    diagnosis = with_outputs(incident.diagnosis, incident.probe_output)
    sections = raw_evidence(diagnosis)
    text = sections[0].text if sections else strings.MSG_PROBE_NO_OUTPUT
    ctx.chat.post(ref.channel, ChatMessage(text=text, sections=sections, incident_id=incident_id),
                  thread=ref)
    return strings.MSG_EVIDENCE_POSTED.format(id=incident_id)
