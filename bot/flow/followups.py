"""What the act step offers after a result, and the GPU health gate in front of every resume.

After each result the message offers ``followup.offers``: Revert, Resume, what a refused
action proposed instead (stop/disable rather than terminate), and the ladder's next rung
(only after the previous one verified failed). Each offer is its own pending approval.

No extraction is resumed without ``run_gate`` on its host first; its message goes in the
thread. A failed gate blocks the resume and offers the override (``ResumeOverride``),
which needs its own (two-person) approval.
"""

from __future__ import annotations

from dataclasses import replace

from bot.config import inventory
from bot.config.settings import Settings
from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome
from bot.domain.findings import ProposedAction
from bot.domain.incident import Incident
from bot.domain.incident_record import GateRecord
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.remediation import followup
from bot.remediation.actions import find, get
from bot.remediation.actions.extraction import ResumeExtraction, ResumeOverride
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.health_gate import GateResult, run_gate
from storage.audit import AuditLog
from storage.incidents import IncidentStore


def is_resume(kind: str) -> bool:
    """An extraction's resume (or its override): the health gate runs before it."""
    known = find(kind)
    return known is not None and known.resumes


class Followups:
    """Offers after a result (each its own approval) and the health gate before a resume."""

    def __init__(self, incidents: IncidentStore, plans: Plans, publisher: Publisher,
                 audit: AuditLog, runner: SSHRunner, settings: Settings, *,
                 gate_need_mib: int = 0, bot_user: str = "incident-bot") -> None:
        self.incidents = incidents
        self.plans = plans
        self.publisher = publisher
        self.audit = audit
        self.runner = runner
        self.settings = settings  # the inventory: each host's probe options for the gate
        self.gate_need_mib = gate_need_mib
        self.bot_user = bot_user

    def offer_followups(self, incident_id: str, result: ActionResult, target: SSHTarget,
                        jobs: list[str], *, follows: str = "") -> list[str]:
        """Store every offer as an approval (Revert as the revert plan); return the jobs
        whose resume was offered, for the caller to chain or leave as buttons. An offer
        already pending on the incident (same kind and parameters) is not offered twice."""
        if result.outcome is Outcome.DRY_RUN:
            return []
        revert = followup.revert_action(result)
        resumes: list[str] = []
        for action in followup.offers(result, jobs):
            if revert is not None and action == revert:
                self._offer_revert(incident_id, action, target, follows)
            elif is_resume(action.kind):
                resumes.append(action.params["job"])
            elif not self.plans.pending(incident_id, action):
                self.plans.offer(incident_id, action, target, follows=follows)
        return resumes

    def _offer_revert(self, incident_id: str, action: ProposedAction,
                      target: SSHTarget, follows: str = "") -> None:
        """A Revert approval, shown apart from the other plans (it undoes what just ran).
        An earlier Revert still pending stays offered, among the plans."""
        risk = get(action.kind).risk_as_revert(action.risk)
        revert = ProposedAction(action.id, action.kind, action.params,
                                strings.FLOW_REVERT_REASON, risk)
        before = self.incidents.require(incident_id).revert_plan
        plan = self.plans.offer(incident_id, revert, target, follows=follows)
        earlier = self.plans.approvals.get(before.approval_id) if before is not None else None
        keep = before if before is not None and earlier is not None and earlier.is_open else None

        def as_revert(incident: Incident) -> Incident:
            plans = [p for p in incident.plans if p.approval_id != plan.approval_id]
            return replace(incident, plans=(*plans, *([keep] if keep else [])),
                           revert_plan=plan)

        self.incidents.update(incident_id, as_revert)

    def offer_resume(self, incident_id: str, job: str, *, follows: str = "") -> None:
        """A Resume button (not chained): the gate runs when it is approved."""
        action = ResumeExtraction.propose("", {"job": job}, strings.FLOW_RESUME_REASON,
                                          "uses the freed GPUs", id=f"resume-{job}"[:64])
        self.plans.offer(incident_id, action, None, follows=follows)

    def gate(self, incident_id: str, target: SSHTarget, job: str, *,
             say_failed: bool = True) -> GateResult:
        """Run the health gate for ``job`` on ``target``; post, store and audit what it said.
        ``say_failed=False``: a failure is left to the caller to word (a drained Slurm node
        stays drained; no override is offered for it)."""
        options = inventory.options_for(self.settings, target)
        result = run_gate(self.runner, target, need_mib=self.gate_need_mib, options=options)
        record = GateRecord(job, target.name, result.passed, tuple(result.reasons),
                            dict(result.checks))
        self.audit.append(incident_id, self.bot_user, "gate.passed" if result.passed
                          else "gate.failed", record.to_json())
        incident = self.incidents.update(incident_id, lambda i: replace(i, gate=record))
        if result.passed or say_failed:
            self.publisher.reply(incident, result.message)
        return result

    def offer_override(self, incident_id: str, job: str, result: GateResult) -> None:
        """The failed gate's way out: resume anyway, behind two distinct approvers."""
        reasons = "; ".join(result.reasons)[:300]
        action = ResumeOverride.propose("", {"job": job}, strings.FLOW_GATE_OVERRIDE_REASON
                                        .format(job=job, reasons=reasons),
                                        strings.FLOW_GATE_OVERRIDE_RISK,
                                        id=f"override-{job}"[:64])
        self.plans.offer(incident_id, action, None, policy=self.plans.override_policy())

    def audit_override(self, incident_id: str, job: str, who: str, result: GateResult) -> None:
        self.audit.append(incident_id, who, "gate.override",
                          {"job": job, "reasons": result.reasons, "kind": ResumeOverride.kind})
        self.publisher.reply(self.incidents.require(incident_id),
                             strings.FLOW_GATE_OVERRIDDEN.format(who=who, job=job))
