"""Step 1: an opened incident is diagnosed over SSH and posted with its buttons."""

from __future__ import annotations

import logging
import time
from typing import Any

from bot.chat.base import ChatMessage, MessageRef, Section
from bot.chat.render import ActionPlan, evidence_hash, render_incident
from bot.config import inventory
from bot.core.errors import UserError
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.flow.context import FlowContext, playbook_for
from bot.remediation import catalog
from bot.ssh.base import SSHTarget
from playbooks import run_playbook

log = logging.getLogger(__name__)
S = IncidentState


def interrupted_job_ids(ctx: FlowContext, host: str) -> list[str]:
    """Jobs on ``host`` that stopped without finishing (vm_restart reports them)."""
    from bot.extract.status import interrupted_jobs  # torch-free, but keep the flow lazy

    return [j.job_id for j in interrupted_jobs(ctx.redis_bytes, host)]


def diagnose(ctx: FlowContext, incident: Incident,
             target: SSHTarget | None) -> tuple[Diagnosis, dict[str, Any]]:
    """Run the incident kind's playbook; an unknown host is a finding, not a crash."""
    context: dict[str, Any] = {"interrupted_jobs": []}
    try:
        context["interrupted_jobs"] = [
            {"job_id": j} for j in interrupted_job_ids(ctx, incident.host)]
    except Exception:  # the job list is context, never a reason not to diagnose
        log.warning("could not read interrupted jobs for %s", incident.host, exc_info=True)
    name = playbook_for(incident.kind)
    if target is None:
        finding = Finding("inventory.unknown_host", Severity.WARNING,
                          f"{incident.host} is not in the inventory",
                          "Add it under `hosts:` in the config to diagnose it over SSH.")
        return Diagnosis(incident.host, name, DiagnosisStatus.UNREACHABLE, 0.0, (finding,)), context
    options = inventory.options_for(ctx.settings, target)
    return run_playbook(ctx.runner, target, name, options=options, context=context), context


def target_for(ctx: FlowContext, host: str) -> SSHTarget | None:
    try:
        return inventory.resolve(ctx.settings, host)
    except UserError:
        return None


def make_plans(ctx: FlowContext, incident: Incident, diagnosis: Diagnosis,
               target: SSHTarget) -> list[ActionPlan]:
    """One pending approval per proposed action; the button carries only its opaque id."""
    ev_hash = evidence_hash(diagnosis)
    plans = []
    for action in diagnosis.actions:
        commands = tuple(catalog.plan(action.kind, action.params, target))
        approval = ctx.approvals.create(
            incident.id, {**action.to_dict(), "commands": list(commands)},
            evidence_hash=ev_hash, requested_by=ctx.bot_user, now=ctx.clock(), policy=ctx.policy)
        plans.append(ActionPlan(action, commands, approval.id))
    return plans


def plans_to_meta(plans: list[ActionPlan]) -> list[dict[str, Any]]:
    return [{"action": p.action.to_dict(), "commands": list(p.commands),
             "approval_id": p.approval_id} for p in plans]


def plans_from_meta(raw: list[dict[str, Any]]) -> list[ActionPlan]:
    out = []
    for p in raw:
        a = p["action"]
        action = ProposedAction(a["id"], a["kind"], dict(a["params"]), a.get("reason", ""),
                                a.get("risk", ""))
        out.append(ActionPlan(action, tuple(p["commands"]), p["approval_id"]))
    return out


def where_to_post(ctx: FlowContext, incident: Incident,
                  wait_s: float = 15.0) -> tuple[str, MessageRef | None]:
    """A grouped child is posted in its parent's thread (one channel message per group);
    another replica may still be posting the parent, so wait a little for its message."""
    if not incident.parent_id:
        return ctx.channel, None
    deadline = time.monotonic() + wait_s
    while True:
        parent = ctx.incidents.get(incident.parent_id)
        ref = message_ref(parent) if parent is not None else None
        if ref is not None or time.monotonic() >= deadline:
            return (ref.channel, ref) if ref is not None else (ctx.channel, None)
        time.sleep(0.2)


def on_incident_opened(ctx: FlowContext, incident_id: str) -> Incident:
    """Diagnose, post the findings with Approve/Deny, and wait for a person."""
    started = time.monotonic()
    incident = ctx.incidents.transition(incident_id, S.DIAGNOSING, ctx.bot_user, "alert received")
    target = target_for(ctx, incident.host)
    diagnosis, _ = diagnose(ctx, incident, target)
    plans = make_plans(ctx, incident, diagnosis, target) if target is not None else []
    next_state = S.AWAITING_APPROVAL if plans or diagnosis.findings else S.RESOLVED
    reason = f"{len(diagnosis.findings)} findings, {len(plans)} proposed actions"
    incident = ctx.incidents.transition(incident_id, next_state, ctx.bot_user, reason,
                                        evidence_hash(diagnosis))
    approvals = {p.approval_id: ctx.approvals.get(p.approval_id) for p in plans}
    message = render_incident(incident, diagnosis, plans,
                              {k: v for k, v in approvals.items() if v is not None})
    channel, parent_ref = where_to_post(ctx, incident)
    ref = ctx.chat.post(channel, message, thread=parent_ref)
    for plan in plans:
        ctx.approvals.attach_message(plan.approval_id, ref.channel, ref.ts)
    chat = {"channel": ref.channel, "ts": ref.ts,
            "thread_ts": parent_ref.ts if parent_ref is not None else ref.ts}
    ctx.incidents.set_meta(incident_id, diagnosis=diagnosis.to_dict(),
                           plans=plans_to_meta(plans), chat=chat,
                           evidence_hash=evidence_hash(diagnosis))
    ctx.notes.append(f"diagnosed {incident.host} ({diagnosis.playbook}) in "
                     f"{diagnosis.duration_s:.2f}s; posted in {time.monotonic() - started:.2f}s")
    return incident


def message_ref(incident: Incident) -> MessageRef | None:
    """The incident's own message (edited in place)."""
    chat = incident.meta.get("chat")
    return MessageRef(chat["channel"], chat["ts"]) if chat else None


def thread_ref(incident: Incident) -> MessageRef | None:
    """Where its replies go: its own thread, or its group parent's for a grouped host."""
    chat = incident.meta.get("chat")
    return MessageRef(chat["channel"], chat.get("thread_ts") or chat["ts"]) if chat else None


def note(text: str, code: str | None = None) -> ChatMessage:
    return ChatMessage(text=text, sections=(Section(text, code=code),))


def post_in_thread(ctx: FlowContext, incident: Incident, text: str,
                   code: str | None = None) -> MessageRef | None:
    """A reply in the incident's thread (its group parent's, for a grouped host)."""
    ref = thread_ref(incident)
    return ctx.chat.post(ref.channel, note(text, code), thread=ref) if ref is not None else None
