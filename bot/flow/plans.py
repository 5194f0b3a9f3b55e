"""Proposed actions as stored plans: one pending approval each, kept in the incident's meta.

The diagnose step creates the first plans; the act step offers follow-ups (Revert, Resume)
through ``offer``. Buttons carry only the approval's opaque id.
"""

from __future__ import annotations

from typing import Any

from bot.chat.render import ActionPlan, evidence_hash
from bot.domain.findings import Diagnosis, ProposedAction
from bot.domain.incident import Incident
from bot.flow.context import FlowContext
from bot.remediation import catalog
from bot.ssh.base import SSHTarget


def new_plan(ctx: FlowContext, incident_id: str, action: ProposedAction,
             commands: tuple[str, ...], ev_hash: str) -> ActionPlan:
    """A pending approval for ``action`` and the exact commands it will run."""
    approval = ctx.approvals.create(
        incident_id, {**action.to_dict(), "commands": list(commands)},
        evidence_hash=ev_hash, requested_by=ctx.bot_user, now=ctx.clock(), policy=ctx.policy)
    return ActionPlan(action, commands, approval.id)


def make_plans(ctx: FlowContext, incident: Incident, diagnosis: Diagnosis,
               target: SSHTarget) -> list[ActionPlan]:
    """One pending approval per proposed action."""
    ev_hash = evidence_hash(diagnosis)
    return [new_plan(ctx, incident.id, a, tuple(catalog.plan(a.kind, a.params, target)), ev_hash)
            for a in diagnosis.actions]


def plan_to_meta(p: ActionPlan) -> dict[str, Any]:
    return {"action": p.action.to_dict(), "commands": list(p.commands),
            "approval_id": p.approval_id}


def plans_to_meta(plans: list[ActionPlan]) -> list[dict[str, Any]]:
    return [plan_to_meta(p) for p in plans]


def plans_from_meta(raw: list[dict[str, Any]]) -> list[ActionPlan]:
    out = []
    for p in raw:
        a = p["action"]
        action = ProposedAction(a["id"], a["kind"], dict(a["params"]), a.get("reason", ""),
                                a.get("risk", ""))
        out.append(ActionPlan(action, tuple(p["commands"]), p["approval_id"]))
    return out


def stored_plans(incident: Incident) -> tuple[list[ActionPlan], ActionPlan | None]:
    """(the plans offered so far, the revert plan if one is offered)."""
    meta = incident.meta
    plans = plans_from_meta(meta.get("plans", []))
    revert = plans_from_meta([meta["revert_plan"]])[0] if meta.get("revert_plan") else None
    return plans, revert
