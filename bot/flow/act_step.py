"""Step 3: an accepted approval, in the action executor: re-probe → act → verify → follow-ups.

Runs off the click's thread (``FlowContext.run_off_thread``). Follow-ups are a loop, not
a recursion: a GPU-freeing action may offer a Revert and chain (or offer) the resume of
the host's interrupted extraction; each result is stored, then the message re-rendered.
Every resume (chained, approved, or overridden) runs the GPU health gate on its host
first (``bot.flow.followups``); a failed gate blocks it and offers an override.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from bot.core import strings
from bot.core.errors import log_internal
from bot.domain.action_result import ActionResult
from bot.domain.approval import Approval
from bot.domain.findings import Diagnosis
from bot.domain.incident import Incident
from bot.domain.incident_record import LastOutcome, StepResult
from bot.domain.lifecycle import IncidentState
from bot.flow import followups, reboot_step
from bot.flow.context import FlowContext
from bot.flow.hosts import act_options, diagnose, interrupted_job_ids, target_for
from bot.flow.message import publish
from bot.flow.plans import offer
from bot.flow.thread import post_in_thread
from bot.remediation import followup
from bot.remediation.execute import execute
from bot.ssh.base import SSHTarget
from playbooks.health_gate import gated
from storage.jobs import JobLinks

log = logging.getLogger(__name__)
GPU_FREEING = frozenset(followup.GPU_FREEING)  # a success offers the host's resumes
NO_REPROBE = {"systemd.revert", *followups.RESUME_KINDS}
STALLED_S = 900.0  # far past every step, verify and re-probe deadline of one action


def still_proposed(fresh: Diagnosis, action: dict[str, Any]) -> bool:
    """The approved action is still what the host needs (same kind and parameters)."""
    return any(a.kind == action["kind"] and a.params == action["params"] for a in fresh.actions)


def run_approved(ctx: FlowContext, approval: Approval, user: str) -> None:
    """The whole action for one claimed approval; always ends with a re-render."""
    incident_id = approval.incident_id
    try:
        _run(ctx, approval, user)
    except Exception as exc:  # the claim is spent: say so on the message, with an id
        error_id = log_internal(exc, f"action {approval.kind} for incident {incident_id}")
        fail(ctx, incident_id, f"{approval.kind}: internal error {error_id}")
    finally:
        ctx.incidents.update(incident_id, lambda i: replace(i, running=None))
        publish(ctx, incident_id)


def recover_stalled(ctx: FlowContext, max_age_s: float = STALLED_S) -> list[str]:
    """Actions whose replica died mid-way (still "running" long past every deadline)
    become ``action_failed`` with Retry, instead of showing "running" forever."""
    stalled = []
    for incident in ctx.incidents.list(open_only=True):
        running = incident.running
        if running is None or ctx.clock() - running.at < max_age_s:
            continue
        fail_stalled(ctx, incident.id)
        stalled.append(incident.id)
    return stalled


def fail_stalled(ctx: FlowContext, incident_id: str, _why: str = "") -> None:
    """One interrupted action: ``action_failed`` with Retry, never run again (the
    reconciler calls this for an approved or remediating step whose owner is gone)."""
    running = ctx.incidents.require(incident_id).running
    kind = (running.kind if running is not None else "") or "action"
    fail(ctx, incident_id, strings.FLOW_INTERRUPTED.format(kind=kind))
    ctx.incidents.update(incident_id, lambda i: replace(i, running=None))
    publish(ctx, incident_id)


def fail(ctx: FlowContext, incident_id: str, text: str) -> None:
    """Record a failure that happened before (or instead of) an action result."""
    incident = ctx.incidents.update(incident_id, lambda i: replace(
        i.with_result(StepResult(False, text)), last_outcome=LastOutcome(text)))
    if incident.state in (IncidentState.APPROVED, IncidentState.REMEDIATING):
        ctx.incidents.transition(incident_id, IncidentState.ACTION_FAILED, ctx.bot_user, text[:200])


def _run(ctx: FlowContext, approval: Approval, user: str) -> None:
    incident = ctx.incidents.require(approval.incident_id)
    target, action = target_for(ctx, incident.host), approval.action
    if target is None:
        fail(ctx, incident.id, strings.FLOW_UNKNOWN_HOST.format(host=incident.host))
        return
    if action["kind"] not in NO_REPROBE and not action.get("offered"):
        fresh, _ = diagnose(ctx, incident, target)
        if not still_proposed(fresh, action):
            _not_needed(ctx, incident, approval, user, fresh)
            return
    _to_remediating(ctx, incident.id, user, action["kind"])
    before = reboot_step.boot_id(ctx, target) if action["kind"] == "host.reboot" else None
    result = _act(ctx, incident, target, approval, user)
    while result is not None:
        if reboot_step.requested(result):  # verified when the host is back (reboot_step)
            reboot_step.on_requested(ctx, incident.id, result, before)
            return
        _record(ctx, incident.id, result)
        result = _follow_up(ctx, incident.id, result, target, user)


def _act(ctx: FlowContext, incident: Incident, target: SSHTarget, approval: Approval,
         user: str) -> ActionResult | None:
    """Run the approved action: a resume behind the health gate, anything else as is."""
    action = approval.action
    if followups.is_resume(action["kind"]):
        override = ", ".join(approval.approvers or (user,)) \
            if action["kind"] == followups.OVERRIDE else None
        return _gated_resume(ctx, incident.id, target, action["params"]["job"], user,
                             approval.evidence_hash, override)
    return execute(ctx.runner, target, action["kind"], dict(action["params"]), approver=user,
                   evidence_hash=approval.evidence_hash, audit=ctx.audit,
                   options=act_options(ctx, incident.host), incident_id=incident.id)


def _gated_resume(ctx: FlowContext, incident_id: str, target: SSHTarget, job: str, user: str,
                  ev_hash: str | None, override: str | None) -> ActionResult | None:
    """The health gate, then the resume: None when the gate blocked it (said, and an
    override offered). An override (its own approval) runs it anyway, audited."""
    gate = followups.gate(ctx, incident_id, target, job)
    kind = followups.OVERRIDE if override else "extraction.resume"

    def resume() -> ActionResult:
        return execute(ctx.runner, target, kind, {"job": job}, approver=user,
                       evidence_hash=ev_hash, audit=ctx.audit, options=ctx.remediation,
                       incident_id=incident_id)

    outcome = gated(gate, resume, override_by=override)
    if outcome.ran:
        if outcome.override_by:
            followups.audit_override(ctx, incident_id, job, outcome.override_by, gate)
        return outcome.result if isinstance(outcome.result, ActionResult) else None
    fail(ctx, incident_id, gate.message)
    followups.offer_override(ctx, incident_id, job, gate)
    return None


def _to_remediating(ctx: FlowContext, incident_id: str, user: str, kind: str) -> None:
    """First action: approved → remediating; a follow-up (Revert, Resume) goes there from
    verified, action_failed or resumed."""
    current = ctx.incidents.require(incident_id).state
    if current in (IncidentState.APPROVED, IncidentState.VERIFIED, IncidentState.ACTION_FAILED,
                   IncidentState.RESUMED):
        reason = "acting" if current is IncidentState.APPROVED else f"follow-up {kind} approved"
        ctx.incidents.transition(incident_id, IncidentState.REMEDIATING, user, reason)


def _not_needed(ctx: FlowContext, incident: Incident, approval: Approval, user: str,
                fresh: Diagnosis) -> None:
    """The finding no longer holds: do not act; say what the host looks like now."""
    now = "; ".join(f.title for f in fresh.findings) or strings.FLOW_NO_FINDINGS
    text = strings.FLOW_NOT_ACTING.format(kind=approval.action["kind"], now=now)
    ctx.audit.append(incident.id, user, "action.skipped", {"reason": "finding no longer holds",
                                                          "now": now[:500]})
    ctx.incidents.update(incident.id, lambda i: replace(i, results=(StepResult(True, text),)))
    if ctx.incidents.require(incident.id).state is IncidentState.APPROVED:
        ctx.incidents.transition(incident.id, IncidentState.RESOLVED, user,
                                 "finding no longer holds")
    post_in_thread(ctx, incident, text)


def _record(ctx: FlowContext, incident_id: str, result: ActionResult) -> None:
    """Store one result, move remediating → verified | action_failed, tell the thread."""
    incident = ctx.incidents.update(incident_id, lambda i: replace(
        i.with_result(StepResult(result.ok, result.summary)),
        last_outcome=LastOutcome.of(result)))
    ctx.notes.append(f"{result.kind}: {result.outcome.value} in {result.duration_s:.2f}s")
    if incident.state is IncidentState.REMEDIATING:
        goal = IncidentState.VERIFIED if result.ok else IncidentState.ACTION_FAILED
        ctx.incidents.transition(incident_id, goal, ctx.bot_user, result.summary)
    post_in_thread(ctx, incident, result.summary, commands_text(result))


def commands_text(result: ActionResult) -> str:
    lines = [f"$ {c.command}  → exit {c.exit_status}{' (timed out)' if c.timed_out else ''}"
             f" in {c.duration_s:.2f}s" for c in result.commands]
    if result.verification is not None:
        lines.append(f"verify: {result.verification.detail}")
    return "\n".join(lines) or "(no commands)"


def _follow_up(ctx: FlowContext, incident_id: str, result: ActionResult, target: SSHTarget,
               user: str) -> ActionResult | None:
    """Offer what comes after ``result`` (Revert, a refusal's alternatives, the ladder's
    next rung, the lasting fix: each its own approval); return the chained resume's
    result, or None."""
    if result.ok and followups.is_resume(result.kind):
        _mark_resumed(ctx, incident_id, result.params["job"])
        return None
    if result.ok and result.kind == "disk.cleanup":
        _offer_other_parts(ctx, incident_id, result, target)
    freed = result.ok and result.kind in GPU_FREEING
    jobs = interrupted_job_ids(ctx, ctx.incidents.require(incident_id).host) if freed else []
    resumes = followups.offer_followups(ctx, incident_id, result, target, jobs[:1])
    if not resumes:
        return None
    if not ctx.remediation.chain_resume:
        followups.offer_resume(ctx, incident_id, resumes[0])
        return None
    incident = ctx.incidents.require(incident_id)
    return _gated_resume(ctx, incident_id, target, resumes[0], user,
                         incident.evidence_hash or None, None)


def _offer_other_parts(ctx: FlowContext, incident_id: str, result: ActionResult,
                       target: SSHTarget) -> None:
    """After one part of a disk cleanup, the parts it left, each its own approval again
    (the act step's preflight re-checks every file when one is clicked)."""
    from bot.flow.cleanup_offer import rest

    stored = ctx.incidents.require(incident_id).diagnosis
    for action in rest(stored, result.params["paths"]) if stored is not None else []:
        offer(ctx, incident_id, action, target)


def _mark_resumed(ctx: FlowContext, incident_id: str, job_id: str) -> None:
    JobLinks(ctx.redis_bytes).link(job_id, incident_id)
    ctx.incidents.update(incident_id, lambda i: replace(i, job_id=job_id))
    if ctx.incidents.require(incident_id).state is IncidentState.VERIFIED:
        ctx.incidents.transition(incident_id, IncidentState.RESUMED, ctx.bot_user,
                                 f"extraction {job_id} resumed")
