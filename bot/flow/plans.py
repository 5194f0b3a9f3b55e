"""Proposed actions as stored plans: one pending approval each, kept in ``Incident.plans``.

The diagnose step creates the first plans (and a Resume for each interrupted job when
nothing proposed would free GPUs first); the act step offers follow-ups (Revert, Resume,
a refusal's alternatives, the ladder's next rung, the gate override) through ``offer``.
An offered plan is marked ``offered``: the act step does not require the diagnosis to
propose it again. Buttons carry only the approval's opaque id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from bot.chat.policy_notes import note_for
from bot.core import strings
from bot.domain import validate
from bot.domain.approval import ApprovalAction, ApprovalPolicy
from bot.domain.evidence import evidence_hash
from bot.domain.findings import Diagnosis, ProposedAction
from bot.domain.incident import Incident
from bot.domain.incident_record import ActionPlan
from bot.remediation import catalog
from bot.remediation.actions import find
from bot.remediation.actions.extraction import ResumeExtraction, ResumeOverride, job_id
from bot.remediation.policy_gate import PolicyGate
from bot.remediation.proposals import refusal
from bot.ssh.base import SSHTarget
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.incidents import IncidentStore


class Plans:
    """Pending approvals for proposed actions, stored on the incident and its message."""

    def __init__(self, incidents: IncidentStore, approvals: ApprovalStore, audit: AuditLog,
                 policy: ApprovalPolicy, *, gate: PolicyGate | None = None,
                 bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.incidents = incidents
        self.gate = gate  # the fleet policies: which proposal runs without a click
        self.approvals = approvals
        self.audit = audit
        self.policy = policy
        self.bot_user = bot_user
        self.clock = clock

    def new_plan(self, incident_id: str, action: ProposedAction, commands: tuple[str, ...],
                 ev_hash: str, *, offered: bool = False,
                 policy: ApprovalPolicy | None = None,
                 extra: dict[str, str] | None = None) -> ActionPlan:
        """A pending approval for ``action`` and the exact commands it will run;
        ``extra`` is the fleet policy's say on it (its name, mode and thread note)."""
        approval = self.approvals.create(
            incident_id, ApprovalAction.of(action, commands, offered=offered, policy=extra),
            evidence_hash=ev_hash, requested_by=self.bot_user, now=self.clock(),
            policy=policy or self.policy)
        return ActionPlan(action, commands, approval.id)

    def make_plans(self, incident: Incident, diagnosis: Diagnosis,
                   target: SSHTarget) -> list[ActionPlan]:
        """One pending approval per proposed action, plus Resume for interrupted jobs."""
        ev_hash = evidence_hash(diagnosis)
        actions = [*diagnosis.actions, *resume_proposals(diagnosis)]
        return [self._planned(incident, a, target, ev_hash) for a in actions
                if self._plannable(incident, a, target)]

    def _plannable(self, incident: Incident, action: ProposedAction, target: SSHTarget) -> bool:
        """A proposal the catalog refuses is skipped (audited), never an exception that
        kills the diagnosis; ``Hosts.diagnose`` has already turned it into an info finding."""
        why = refusal(action, target)
        if why is None:
            return True
        self.audit.append(incident.id, self.bot_user, "proposal.skipped",
                          {"kind": action.kind, "id": action.id, "reason": why[:300]})
        return False

    def _planned(self, incident: Incident, action: ProposedAction, target: SSHTarget,
                 ev_hash: str) -> ActionPlan:
        """One proposal's approval, under the fleet policy that matches it (if any): the
        policy's approvers decide, and its mode and note ride on the approval."""
        commands = tuple(catalog.plan(action.kind, action.params, target))
        if self.gate is None:
            return self.new_plan(incident.id, action, commands, ev_hash)
        gated = self.gate.gate(action, target.name, incident.kind, incident.id, self.policy)
        known = find(action.kind)
        note = note_for(gated.decision, action, target.name, known.title if known else "")
        extra = {**gated.extra, **({"policy_note": note} if note else {})}
        return self.new_plan(incident.id, action, commands, ev_hash, policy=gated.rules,
                             extra=extra)

    def new_offer(self, incident_id: str, action: ProposedAction, target: SSHTarget | None,
                  *, policy: ApprovalPolicy | None = None, follows: str = "") -> ActionPlan:
        """A follow-up's approval (under the incident's evidence); the incident keeps it
        through the flow (``Followups.offer``: ``PlanOffered``). ``follows``: the approval
        of the step whose result offered it (a revert of that step withdraws it)."""
        commands = tuple(catalog.plan(action.kind, action.params, target))
        incident = self.incidents.require(incident_id)
        return replace(self.new_plan(incident_id, action, commands, incident.evidence_hash,
                                     offered=True, policy=policy), follows=follows)

    def attach_message(self, approval_ids: Sequence[str], channel: str, ts: str) -> None:
        """Each approval learns the message that holds its button (expiry edits it)."""
        for approval_id in approval_ids:
            self.approvals.attach_message(approval_id, channel, ts)

    def override_policy(self) -> ApprovalPolicy:
        """The gate override always needs two distinct approvers (the two-person rule)."""
        return replace(self.policy, two_person=self.policy.two_person | {ResumeOverride.kind})

    def withdraw_pending(self, incident: Incident, actor: str, keep: str = "",
                         reason: str = strings.WITHDRAWN_REASON,
                         only: Collection[str] | None = None) -> list[str]:
        """Cancel every other still-pending approval of the incident (or only those in
        ``only``), each audited."""
        cancelled = []
        for approval in self.approvals.for_incident(incident.id):
            if approval.id == keep or not approval.is_open or (
                    only is not None and approval.id not in only):
                continue
            if self.approvals.cancel(approval.id, actor, reason, self.clock()):
                self.audit.append(incident.id, actor, "approval.cancelled",
                                  {"approval_id": approval.id, "kind": approval.kind,
                                   "reason": reason, "because": keep})
                cancelled.append(approval.id)
        return cancelled

    def pending(self, incident_id: str, action: ProposedAction) -> bool:
        """An approval for the same kind and parameters is still open on the incident."""
        return any(a.is_open and a.kind == action.kind and a.action.params == action.params
                   for a in self.approvals.for_incident(incident_id))


def resume_proposals(diagnosis: Diagnosis) -> list[ProposedAction]:
    """Resume each interrupted job the playbook found, unless an action that frees GPUs is
    proposed (then Resume is offered after it verified). The gate runs at act time."""
    if any((known := find(a.kind)) is not None and known.frees_gpus for a in diagnosis.actions):
        return []
    jobs = [str(j.get("job_id", "")) if isinstance(j, dict) else str(j)
            for f in diagnosis.findings if f.code == "extract.interrupted"
            for j in (f.evidence.get("jobs") or [])]
    return [ResumeExtraction.propose(diagnosis.host, {"job": job},
                                     strings.FLOW_RESUME_INTERRUPTED_REASON.format(
                                         job=job, host=diagnosis.host), id=f"resume-{job}"[:64])
            for job in jobs if validate.is_valid(job_id, job)]
