"""What the act step offers after a result, and the GPU health gate in front of every resume.

After each result the message offers ``followup.offers``: Revert, Resume, what a refused
action proposed instead (stop/disable rather than terminate), and the ladder's next rung
(only after the previous one verified failed). Each offer is its own pending approval.

No extraction is resumed without ``run_gate`` on its host first; its message goes in the
thread. A failed gate blocks the resume and offers ``extraction.resume_override``, which
needs its own (two-person) approval.
"""

from __future__ import annotations

from dataclasses import replace

from bot.config import inventory
from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome
from bot.domain.findings import ProposedAction
from bot.domain.incident import Incident
from bot.domain.incident_record import GateRecord
from bot.flow.context import FlowContext
from bot.flow.plans import OVERRIDE, offer, override_policy
from bot.flow.thread import post_in_thread
from bot.remediation import followup
from bot.ssh.base import SSHTarget
from playbooks.health_gate import GateResult, run_gate

RESUME_KINDS = frozenset({"extraction.resume", OVERRIDE})


def offer_followups(ctx: FlowContext, incident_id: str, result: ActionResult,
                    target: SSHTarget, jobs: list[str]) -> list[str]:
    """Store every offer as an approval (Revert as the revert plan); return the jobs whose
    resume was offered, for the caller to chain or leave as buttons. An offer already
    pending on the incident (same kind and parameters) is not offered twice."""
    if result.outcome is Outcome.DRY_RUN:
        return []
    revert = followup.revert_action(result)
    resumes: list[str] = []
    for action in followup.offers(result, jobs):
        if revert is not None and action == revert:
            _offer_revert(ctx, incident_id, action, target)
        elif action.kind == "extraction.resume":
            resumes.append(action.params["job"])
        elif not _pending(ctx, incident_id, action):
            offer(ctx, incident_id, action, target)
    return resumes


def _pending(ctx: FlowContext, incident_id: str, action: ProposedAction) -> bool:
    return any(a.is_open and a.kind == action.kind and a.action.get("params") == action.params
               for a in ctx.approvals.for_incident(incident_id))


def _offer_revert(ctx: FlowContext, incident_id: str, action: ProposedAction,
                  target: SSHTarget) -> None:
    """A Revert approval, shown apart from the other plans (it undoes what just ran). An
    earlier Revert still pending stays offered, among the plans."""
    risk = strings.FLOW_REVERT_RISK if action.kind == "systemd.revert" else action.risk
    revert = ProposedAction(action.id, action.kind, action.params, strings.FLOW_REVERT_REASON,
                            risk)
    before = ctx.incidents.require(incident_id).revert_plan
    plan = offer(ctx, incident_id, revert, target)
    earlier = ctx.approvals.get(before.approval_id) if before is not None else None
    keep_earlier = before is not None and earlier is not None and earlier.is_open

    def as_revert(incident: Incident) -> Incident:
        plans = [p for p in incident.plans if p.approval_id != plan.approval_id]
        if keep_earlier and before is not None:
            plans.append(before)
        return replace(incident, plans=tuple(plans), revert_plan=plan)

    ctx.incidents.update(incident_id, as_revert)


def offer_resume(ctx: FlowContext, incident_id: str, job: str) -> None:
    """A Resume button (not chained): the gate runs when it is approved."""
    action = ProposedAction(f"resume-{job}"[:64], "extraction.resume", {"job": job},
                            strings.FLOW_RESUME_REASON, "uses the freed GPUs")
    offer(ctx, incident_id, action, None)


def gate(ctx: FlowContext, incident_id: str, target: SSHTarget, job: str) -> GateResult:
    """Run the health gate for ``job`` on ``target``; post, store and audit what it said."""
    options = inventory.options_for(ctx.settings, target)
    result = run_gate(ctx.runner, target, need_mib=ctx.remediation.gate_need_mib,
                      options=options)
    record = GateRecord(job, target.name, result.passed, tuple(result.reasons),
                        dict(result.checks))
    ctx.audit.append(incident_id, ctx.bot_user, "gate.passed" if result.passed
                     else "gate.failed", record.to_json())
    incident = ctx.incidents.update(incident_id, lambda i: replace(i, gate=record))
    post_in_thread(ctx, incident, result.message)
    ctx.notes.append(f"health gate on {target.name}: {'passed' if result.passed else 'failed'}")
    return result


def offer_override(ctx: FlowContext, incident_id: str, job: str, result: GateResult) -> None:
    """The failed gate's way out: resume anyway, behind two distinct approvers."""
    reasons = "; ".join(result.reasons)[:300]
    action = ProposedAction(f"override-{job}"[:64], OVERRIDE, {"job": job},
                            strings.FLOW_GATE_OVERRIDE_REASON.format(job=job, reasons=reasons),
                            strings.FLOW_GATE_OVERRIDE_RISK)
    offer(ctx, incident_id, action, None, policy=override_policy(ctx))


def audit_override(ctx: FlowContext, incident_id: str, job: str, who: str,
                   result: GateResult) -> None:
    ctx.audit.append(incident_id, who, "gate.override",
                     {"job": job, "reasons": result.reasons, "kind": OVERRIDE})
    post_in_thread(ctx, ctx.incidents.require(incident_id),
                   strings.FLOW_GATE_OVERRIDDEN.format(who=who, job=job))


def is_resume(kind: str) -> bool:
    return kind in RESUME_KINDS

