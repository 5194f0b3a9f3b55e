"""What the act step offers after a result, and the GPU health gate in front of every resume.

After each result the message offers ``followup.offers``: Revert, Resume, what a refused
action proposed instead (stop/disable rather than terminate), and the ladder's next rung
(only after the previous one verified failed). Each offer is its own pending approval.

No extraction is resumed, no Slurm node returned and no repair (a verified GPU reset or
reboot) closed as fixed without ``run_gate`` on its host first: the host group's graded
levels (``extra.gate``), recorded through the flow (``GateObserved``, decided in
``bot/domain/flow.py``), its message in the thread. A failed gate blocks the resume and
offers the override (``ResumeOverride``), which needs its own (two-person) approval; a
repair it keeps out is not fixed (verified → action_failed). A node on the RMA list (a
fault back after a passed gate, ``bot/flow/repeat_watch.py``) is kept out whatever the
levels say, and its hand-off (``RmaHandoff``) offered again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.config import inventory
from bot.config.gate import policy_for
from bot.config.settings import Settings
from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome
from bot.domain.approval import ApprovalPolicy
from bot.domain.findings import ProposedAction
from bot.domain.flow import GateObserved, PlanOffered
from bot.domain.incident_record import ActionPlan, GateRecord
from bot.domain.repeat import GatePass, RepeatOffence
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.flow.runner import FlowRunner
from bot.remediation import followup
from bot.remediation.actions import find, get
from bot.remediation.actions.extraction import ResumeExtraction, ResumeOverride
from bot.remediation.actions.rma import bundle, rma_action
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.health_gate import GateResult, run_gate
from playbooks.parsers.smoke import SmokeGpu
from storage.audit import AuditLog
from storage.health_history import HealthHistory
from storage.incidents import IncidentStore


def gate_job(node: str) -> str:
    """What the gate record names instead of an extraction job: a Slurm node's return."""
    return f"slurm:{node}"


def is_resume(kind: str) -> bool:
    """An extraction's resume (or its override): the health gate runs before it."""
    known = find(kind)
    return known is not None and known.resumes


class Followups:
    """Offers after a result (each its own approval) and the health gate before a resume."""

    def __init__(self, flow_runner: FlowRunner, incidents: IncidentStore, plans: Plans,
                 publisher: Publisher, audit: AuditLog, runner: SSHRunner, settings: Settings,
                 *, gate_need_mib: int = 0, bot_user: str = "incident-bot",
                 history: HealthHistory | None = None) -> None:
        self.flow_runner = flow_runner  # the gate's record and what it decides: an event
        self.incidents = incidents
        self.plans = plans
        self.publisher = publisher
        self.audit = audit
        self.runner = runner
        self.settings = settings  # the inventory: each host's probe options for the gate
        self.gate_need_mib = gate_need_mib
        self.bot_user = bot_user
        self.history = history  # passed gates, the smoke baseline, the RMA list (issue 36)

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
                self.offer(incident_id, action, target, follows=follows)
        return resumes

    def _offer_revert(self, incident_id: str, action: ProposedAction,
                      target: SSHTarget, follows: str = "") -> None:
        """A Revert approval, shown apart from the other plans (it undoes what just ran).
        An earlier Revert still pending stays offered, among the plans."""
        risk = get(action.kind).risk_as_revert(action.risk)
        revert = ProposedAction(action.id, action.kind, action.params,
                                strings.FLOW_REVERT_REASON, risk)
        before = self.incidents.require(incident_id).revert_plan
        plan = self.plans.new_offer(incident_id, revert, target, follows=follows)
        earlier = self.plans.approvals.get(before.approval_id) if before is not None else None
        keep = before if before is not None and earlier is not None and earlier.is_open else None
        self.flow_runner.handle(incident_id, PlanOffered(
            self.flow_runner.clock(), self.bot_user, plan, revert=True, keep=keep))

    def offer(self, incident_id: str, action: ProposedAction, target: SSHTarget | None,
              *, policy: ApprovalPolicy | None = None, follows: str = "") -> ActionPlan:
        """A follow-up's approval appended to the incident's plans, on its message's
        buttons (``PlanOffered``); ``follows``: the approval whose result offered it."""
        plan = self.plans.new_offer(incident_id, action, target, policy=policy,
                                    follows=follows)
        self.flow_runner.handle(incident_id, PlanOffered(self.flow_runner.clock(),
                                                         self.bot_user, plan))
        return plan

    def offer_resume(self, incident_id: str, job: str, *, follows: str = "") -> None:
        """A Resume button (not chained): the gate runs when it is approved."""
        action = ResumeExtraction.propose("", {"job": job}, strings.FLOW_RESUME_REASON,
                                          "uses the freed GPUs", id=f"resume-{job}"[:64])
        self.offer(incident_id, action, None, follows=follows)

    def gate(self, incident_id: str, target: SSHTarget, job: str, *,
             say_failed: bool = True, since: float | None = None,
             need_mib: int | None = None, repair: bool = False,
             cleared_by: str = "") -> GateResult:
        """Run the host group's graded health gate (``extra.gate``) for ``job`` on
        ``target``, its smoke compared with the node's last good run; what each level said
        is stored, audited and posted through the flow (``GateObserved``). A passed gate is
        kept in the node's history (a repeat fault within the window is judged against it)
        and its smoke figures become the baseline. ``since``: the repair's start (Xids
        before it are not new). ``say_failed=False``: a failure is left to the caller to
        word (a drained Slurm node stays drained). ``repair``: a repaired host's return
        (``after_repair``)."""
        options = inventory.options_for(self.settings, target)
        baseline = self._baseline(target.name)
        result = run_gate(self.runner, target, options=options, since=since, baseline=baseline,
                          need_mib=self.gate_need_mib if need_mib is None else need_mib,
                          policy=policy_for(self.settings, target.name))
        offence = self.offence(target.name)
        if offence is not None:  # the same fault came back after a passed gate: RMA, not work
            result = replace(result, kept_out=strings.REPAIR_KEPT_OUT_RMA.format(
                host=target.name, key=offence.key))
        record = GateRecord(job, target.name, result.passed, tuple(result.reasons),
                            dict(result.checks), result.reached,
                            tuple(r.to_json() for r in result.levels))
        self.flow_runner.handle(incident_id, GateObserved(
            self.flow_runner.clock(), self.bot_user, record, result.message, say=say_failed,
            repair=repair, rma=result.kept_out, cleared_by=cleared_by))
        if result.passed and self.history is not None:
            self.history.record_pass(target.name, GatePass(self.incidents.clock(), incident_id,
                                                           result.reached))
            self.history.set_smoke_baseline(target.name, {g.key: g.to_json()
                                                          for g in result.smoke})
        return result

    def _baseline(self, host: str) -> dict[str, SmokeGpu]:
        if self.history is None:
            return {}
        return {k: SmokeGpu.from_json(v) for k, v in self.history.smoke_baseline(host).items()}

    def offence(self, host: str) -> RepeatOffence | None:
        """The repeat offence that put ``host`` on the RMA list, if it is on it."""
        if self.history is None:
            return None
        return next((o for o in self.history.rma() if o.host == host), None)

    def after_repair(self, incident_id: str, target: SSHTarget, *, since: float | None,
                     node: str | None = None, by: str = "") -> GateResult:
        """The gate before a repaired host goes back to work (a verified reset or reboot):
        the configured levels, no override; a node on the RMA list stays out whatever the
        gate says. Kept out, the incident is not fixed (``decide``: ``verified`` →
        ``action_failed``, the reason as its outcome) and a repeat offender's RMA hand-off
        is offered again; a drained Slurm node's caller words its own note. ``by``: the
        repair, in words, that cleared the incident's Xids."""
        job = gate_job(node) if node else "repair"
        gate = self.gate(incident_id, target, job, say_failed=node is None, since=since,
                         need_mib=0, repair=True, cleared_by=by)
        if not gate.passed and gate.kept_out:
            self.offer_rma(incident_id, target)
        return gate

    def offer_rma(self, incident_id: str, target: SSHTarget) -> None:
        """The RMA hand-off again for a node on the RMA list (an approved drain or reboot
        withdrew the diagnosis's offer with the other alternatives)."""
        if self.offence(target.name) is None:
            return
        action = rma_action(target.name, incident_id)
        if not self.plans.pending(incident_id, action):
            self.offer(incident_id, action, target)

    def rma_bundle(self, incident_id: str, result: ActionResult) -> dict[str, Any]:
        """After a verified RMA hand-off: the evidence bundle (the bug report's path and
        size, the incident's timeline, the health gate's runs, the repeat offence) audited
        as ``rma.bundle`` and said in the thread."""
        entries = self.audit.timeline(incident_id)
        timeline: list[dict[str, Any]] = [
            {"ts": e.ts, "actor": e.actor, "action": e.action,
             "detail": {k: v for k, v in e.detail.items() if k != "captured"}} for e in entries]
        gates = [e.detail for e in entries if e.action.startswith("gate.")]
        offence = self.offence(result.host)
        kept = bundle(result, timeline, gates, offence.to_json() if offence else None)
        self.audit.append(incident_id, self.bot_user, "rma.bundle", kept)
        report = kept["bug_report"]
        self.publisher.reply(self.incidents.require(incident_id), strings.RMA_BUNDLE_SAID.format(
            host=result.host, path=report["path"], size=report["bytes"], events=len(timeline),
            gates=len(gates)))
        return kept

    def offer_override(self, incident_id: str, job: str, result: GateResult) -> None:
        """The failed gate's way out: resume anyway, behind two distinct approvers."""
        reasons = "; ".join(result.reasons)[:300]
        action = ResumeOverride.propose("", {"job": job}, strings.FLOW_GATE_OVERRIDE_REASON
                                        .format(job=job, reasons=reasons),
                                        strings.FLOW_GATE_OVERRIDE_RISK,
                                        id=f"override-{job}"[:64])
        self.offer(incident_id, action, None, policy=self.plans.override_policy())

    def audit_override(self, incident_id: str, job: str, who: str, result: GateResult) -> None:
        self.audit.append(incident_id, who, "gate.override",
                          {"job": job, "reasons": result.reasons, "kind": ResumeOverride.kind})
        self.publisher.reply(self.incidents.require(incident_id),
                             strings.FLOW_GATE_OVERRIDDEN.format(who=who, job=job))
