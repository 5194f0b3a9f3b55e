"""Step 2: a claimed approval → re-probe → act → verify → edit the message → follow-ups.

Called by the approval desk only for the one click that won the atomic claim, so the
action runs once however many people (or replicas, or Slack retries) click.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.chat.render import ActionPlan, StepResult, render_incident
from bot.core import strings
from bot.domain.approval import Approval
from bot.domain.findings import Diagnosis, ProposedAction
from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.flow.context import FlowContext
from bot.flow.diagnose_step import (
    diagnose,
    interrupted_job_ids,
    message_ref,
    plans_from_meta,
    post_in_thread,
    target_for,
)
from bot.remediation import catalog
from bot.remediation.execute import execute
from bot.remediation.result import ActionResult

log = logging.getLogger(__name__)
S = IncidentState
GPU_FREEING = {"systemd.stop_disable", "systemd.mask", "process.terminate"}
NO_REPROBE = {"systemd.revert", "extraction.resume"}
# a click on a button of a denied, expired or resolved incident runs nothing
ACTABLE = {S.AWAITING_APPROVAL, S.APPROVED, S.VERIFIED, S.FAILED, S.RESUMED}


def still_proposed(fresh: Diagnosis, action: dict[str, Any]) -> bool:
    """The approved action is still what the host needs (same kind and parameters)."""
    return any(a.kind == action["kind"] and a.params == action["params"] for a in fresh.actions)


def _thread(ctx: FlowContext, incident: Incident, text: str, code: str | None = None) -> None:
    post_in_thread(ctx, incident, text, code)


def refresh_message(ctx: FlowContext, incident_id: str,
                    results: list[StepResult] | None = None) -> None:
    """Re-render the one incident message from Redis and edit it in place."""
    incident = ctx.incidents.require(incident_id)
    ref, meta = message_ref(incident), incident.meta
    if ref is None or "diagnosis" not in meta:
        return
    plans = plans_from_meta(meta.get("plans", []))
    revert = plans_from_meta([meta["revert_plan"]])[0] if meta.get("revert_plan") else None
    ids = [p.approval_id for p in plans] + ([revert.approval_id] if revert else [])
    approvals = {i: a for i in ids if (a := ctx.approvals.get(i)) is not None}
    stored = [StepResult(bool(r["ok"]), r["text"]) for r in meta.get("results", [])]
    message = render_incident(incident, Diagnosis.from_dict(meta["diagnosis"]), plans,
                              approvals, results or stored, revert)
    ctx.chat.update(ref, message)


def on_approved(ctx: FlowContext, approval: Approval, user: str) -> None:
    incident = ctx.incidents.require(approval.incident_id)
    target = target_for(ctx, incident.host)
    action = approval.action
    if target is None:
        _thread(ctx, incident, strings.FLOW_UNKNOWN_HOST.format(host=incident.host))
        return
    if incident.state not in ACTABLE:
        _skip(ctx, incident, user, strings.FLOW_NOT_ACTABLE.format(
            kind=action["kind"], id=incident.id, state=incident.state.value))
        return
    if action["kind"] not in NO_REPROBE:
        fresh, _ = diagnose(ctx, incident, target)
        if not still_proposed(fresh, action):
            _not_needed(ctx, incident, approval, user, fresh)
            return
    if incident.state is S.AWAITING_APPROVAL:
        ctx.incidents.transition(incident.id, S.APPROVED, user, f"approved {action['kind']}",
                                 approval.evidence_hash)
    _to_remediating(ctx, incident.id, user, action["kind"])
    result = execute(ctx.runner, target, action["kind"], dict(action["params"]), approver=user,
                     evidence_hash=approval.evidence_hash, audit=ctx.audit,
                     options=ctx.remediation, incident_id=incident.id)
    _after_action(ctx, incident.id, result, user)


def _to_remediating(ctx: FlowContext, incident_id: str, user: str, kind: str) -> None:
    """First action: approved → remediating; a follow-up (Revert, Resume, an alternative)
    goes there from verified, failed or resumed."""
    current = ctx.incidents.require(incident_id).state
    if current in (S.APPROVED, S.VERIFIED, S.FAILED, S.RESUMED):
        reason = "acting" if current is S.APPROVED else f"follow-up {kind} approved"
        ctx.incidents.transition(incident_id, S.REMEDIATING, user, reason)


def _skip(ctx: FlowContext, incident: Incident, user: str, text: str) -> None:
    ctx.audit.append(incident.id, user, "action.skipped", {"reason": text[:500]})
    _thread(ctx, incident, text)


def _not_needed(ctx: FlowContext, incident: Incident, approval: Approval, user: str,
                fresh: Diagnosis) -> None:
    """The finding no longer holds: do not act; say what the host looks like now."""
    now = "; ".join(f.title for f in fresh.findings) or strings.FLOW_NO_FINDINGS
    text = strings.FLOW_NOT_ACTING.format(kind=approval.action["kind"], now=now)
    ctx.audit.append(incident.id, user, "action.skipped", {"reason": "finding no longer holds",
                                                          "now": now[:500]})
    ctx.incidents.set_meta(incident.id, results=[{"ok": True, "text": text}])
    if incident.state is S.AWAITING_APPROVAL:
        ctx.incidents.transition(incident.id, S.RESOLVED, user, "finding no longer holds")
    _thread(ctx, incident, text)
    refresh_message(ctx, incident.id)


def _after_action(ctx: FlowContext, incident_id: str, result: ActionResult, user: str) -> None:
    incident = ctx.incidents.require(incident_id)
    results = [*incident.meta.get("results", []), {"ok": result.ok, "text": result.summary}]
    ctx.incidents.set_meta(incident_id, result=result.to_dict(), results=results)
    ctx.notes.append(f"{result.kind}: {result.outcome.value} in {result.duration_s:.2f}s")
    if incident.state is S.REMEDIATING:
        goal = S.VERIFIED if result.ok else S.FAILED
        ctx.incidents.transition(incident_id, goal, ctx.bot_user, result.summary)
    _thread(ctx, incident, result.summary, _commands_text(result))
    if result.ok and result.kind == "extraction.resume":
        _mark_resumed(ctx, incident_id, result.params["job"])
    elif result.ok and result.kind in GPU_FREEING:
        _offer_revert(ctx, incident_id, result)
        _follow_up_resume(ctx, incident_id, user)
    refresh_message(ctx, incident_id)


def _commands_text(result: ActionResult) -> str:
    lines = [f"$ {c.command}  → exit {c.exit_status}{' (timed out)' if c.timed_out else ''}"
             f" in {c.duration_s:.2f}s" for c in result.commands]
    if result.verification is not None:
        lines.append(f"verify: {result.verification.detail}")
    return "\n".join(lines) or "(no commands)"


def _offer_revert(ctx: FlowContext, incident_id: str, result: ActionResult) -> None:
    if not result.revertable or result.revert_params is None:
        return
    incident = ctx.incidents.require(incident_id)
    target = target_for(ctx, incident.host)
    params = dict(result.revert_params)
    commands = tuple(catalog.plan("systemd.revert", params, target))
    action = ProposedAction(f"revert-{result.params.get('unit', '')}"[:64], "systemd.revert",
                            params, strings.FLOW_REVERT_REASON, "restarts what was stopped")
    approval = ctx.approvals.create(incident_id, {**action.to_dict(), "commands": list(commands)},
                                    evidence_hash=result.evidence_hash or "",
                                    requested_by=ctx.bot_user, now=ctx.clock(), policy=ctx.policy)
    plan = ActionPlan(action, commands, approval.id)
    ctx.incidents.set_meta(incident_id, revert_plan={
        "action": action.to_dict(), "commands": list(commands), "approval_id": approval.id})
    ref = message_ref(incident)
    if ref is not None:
        ctx.approvals.attach_message(plan.approval_id, ref.channel, ref.ts)


def _follow_up_resume(ctx: FlowContext, incident_id: str, user: str) -> None:
    """After GPUs are free: resume the host's interrupted extraction (chained or offered)."""
    incident = ctx.incidents.require(incident_id)
    jobs = interrupted_job_ids(ctx, incident.host)
    if not jobs:
        return
    target = target_for(ctx, incident.host)
    if target is None:
        return
    if not ctx.remediation.chain_resume:
        _offer_resume(ctx, incident, jobs[0])
        return
    result = execute(ctx.runner, target, "extraction.resume", {"job": jobs[0]}, approver=user,
                     evidence_hash=incident.meta.get("evidence_hash"), audit=ctx.audit,
                     options=ctx.remediation, incident_id=incident_id)
    _after_action(ctx, incident_id, result, user)


def _offer_resume(ctx: FlowContext, incident: Incident, job_id: str) -> None:
    action = ProposedAction(f"resume-{job_id}"[:64], "extraction.resume", {"job": job_id},
                            strings.FLOW_RESUME_REASON, "uses the freed GPUs")
    commands = tuple(catalog.plan("extraction.resume", action.params, None))
    approval = ctx.approvals.create(incident.id, {**action.to_dict(), "commands": list(commands)},
                                    evidence_hash=incident.meta.get("evidence_hash", ""),
                                    requested_by=ctx.bot_user, now=ctx.clock(), policy=ctx.policy)
    plans = [*incident.meta.get("plans", []), {"action": action.to_dict(),
                                               "commands": list(commands),
                                               "approval_id": approval.id}]
    ctx.incidents.set_meta(incident.id, plans=plans)


def _mark_resumed(ctx: FlowContext, incident_id: str, job_id: str) -> None:
    from storage.jobs import JobLinks

    JobLinks(ctx.redis_bytes).link(job_id, incident_id)
    ctx.incidents.set_meta(incident_id, job=job_id)
    if ctx.incidents.require(incident_id).state is S.VERIFIED:
        ctx.incidents.transition(incident_id, S.RESUMED, ctx.bot_user,
                                 f"extraction {job_id} resumed")


def on_denied(ctx: FlowContext, approval: Approval, user: str, reason: str) -> None:
    incident = ctx.incidents.require(approval.incident_id)
    if incident.state is S.AWAITING_APPROVAL:
        ctx.incidents.transition(incident.id, S.DENIED, user, reason or "denied")
    _thread(ctx, incident, strings.FLOW_DENIED.format(user=user, kind=approval.action["kind"],
                                                      reason=reason or "-"))
    refresh_message(ctx, incident.id)


def on_expired(ctx: FlowContext, approval: Approval) -> None:
    incident = ctx.incidents.get(approval.incident_id)
    if incident is None:
        return
    if incident.state is S.AWAITING_APPROVAL:
        ctx.incidents.transition(incident.id, S.EXPIRED, ctx.bot_user, "approval expired")
    refresh_message(ctx, incident.id)
