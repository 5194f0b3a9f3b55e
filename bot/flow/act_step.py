"""Step 3: an accepted approval, in the action executor: re-probe → act → verify → follow-ups.

Runs off the click's thread (``ApproveStep`` hands it to the action executor). Follow-ups
are a loop, not a recursion: a GPU-freeing action may offer a Revert and chain (or offer)
the resume of the host's interrupted extraction; each result is stored, then the message
re-rendered. Every resume (chained, approved, or overridden) runs the GPU health gate on
its host first (``bot.flow.followups``); a failed gate blocks it and offers an override.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from bot.chat.summary import action_phrase
from bot.core import strings
from bot.core.errors import log_internal
from bot.domain.action_result import ActionResult
from bot.domain.approval import Approval, ApprovalAction
from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.domain.flow import (
    ActionFailed,
    ActionFinished,
    ActionNotNeeded,
    ActionObserved,
    ActionReadBack,
    ActionStarted,
    ReprobeFailed,
    ResumeQueued,
    RevertObserved,
)
from bot.domain.incident import Incident
from bot.domain.incident_record import Running
from bot.domain.lifecycle import ACTING, IllegalTransition, IncidentState, StepTaken
from bot.flow.cleanup_offer import rest
from bot.flow.followups import Followups, is_resume
from bot.flow.hosts import Hosts
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.flow.readback import READ_BACK_ACTOR, Asked, Interrupted, read_back
from bot.flow.reboot_step import RebootStep, requested
from bot.flow.reconcile import CutShort
from bot.flow.runner import FlowRunner
from bot.flow.slurm_step import SlurmStep
from bot.jobs.book import JobBook
from bot.remediation.actions import Action, find
from bot.remediation.actions.extraction import ResumeExtraction, ResumeOverride
from bot.remediation.executor import execute, sent_commands, stopped_midway
from bot.remediation.followup import frees_gpus
from bot.remediation.options import RemediationOptions
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.health_gate import gated
from storage.audit import AuditLog
from storage.connection import refusal
from storage.incidents import IncidentStore, UnknownIncident

log = logging.getLogger(__name__)
STALLED_S = 900.0  # far past every step, verify and re-probe deadline of one action


def still_proposed(fresh: Diagnosis, action: ApprovalAction) -> bool:
    """The approved action is still what the host needs (same kind and parameters)."""
    return any(a.kind == action.kind and a.params == action.params for a in fresh.actions)


def unread(fresh: Diagnosis) -> str | None:
    """Why a fresh diagnosis could not read the host (no session: the transport's words;
    probes that timed out or failed at transport level: theirs), or None when it read it
    in full. Only a full read may say a finding no longer holds."""
    if fresh.status is DiagnosisStatus.UNREACHABLE:
        said = [f.detail or f.title for f in fresh.findings]
        return "; ".join(said)[:300] or strings.FLOW_NO_ANSWER
    if fresh.status is DiagnosisStatus.OK and not cut_off(fresh):
        return None
    failed = [f"{p.name}: {strings.FLOW_TIMED_OUT if p.timed_out else p.error}"
              for p in fresh.probes if p.timed_out or p.error]
    return "; ".join(failed)[:300] or strings.FLOW_NO_ANSWER


def cut_off(fresh: Diagnosis) -> bool:
    """The re-probe lost the host itself: no session, or probes whose session never ran
    (a frozen sshd: no answer opening one). What such a diagnosis proposes is no reading
    of the host: a frozen host reads as a hung nvidia-smi, whose step is a reboot, so
    "still proposed" would send the reboot to a host that cannot take it and wait for a
    boot that never comes. A probe the host ran past its deadline (a hung tool) has a
    session and no transport error: that is a reading."""
    return fresh.status is DiagnosisStatus.UNREACHABLE or any(p.error for p in fresh.probes)


class ActStep:
    """One claimed approval's action: re-probe, act, verify, record, offer what follows."""

    def __init__(self, flow_runner: FlowRunner, incidents: IncidentStore, hosts: Hosts,
                 plans: Plans, publisher: Publisher, followups: Followups, reboots: RebootStep,
                 runner: SSHRunner, audit: AuditLog, jobs: JobBook, options: RemediationOptions,
                 *, bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time, slurm: SlurmStep | None = None) -> None:
        self.flow_runner = flow_runner  # every change to the incident: an event decided there
        self.incidents = incidents
        self.hosts = hosts
        self.plans = plans
        self.publisher = publisher
        self.followups = followups
        self.reboots = reboots
        self.runner = runner
        self.audit = audit
        self.jobs = jobs
        self.options = options
        self.bot_user = bot_user
        self.clock = clock
        self.slurm = slurm  # the drained node: watched, gated before it returns
        # steps this process could not finish (Redis refused, the host stopped answering):
        # the service's reconciler re-drives them (issue 39)
        self.cut_short: CutShort | None = None

    def run_approved(self, approval: Approval, user: str) -> None:
        """The whole action for one claimed approval; ends with its mark gone, re-rendered.

        A Redis refusal (issue 39) is not an error of ours: nothing more can be written now,
        so the step is left as it is, with its running mark, for the reconciler to read the
        host back within a period of Redis taking writes again. A host that stopped
        answering part-way is left the same way, for a read-back once it answers
        (``_host_lost``)."""
        incident_id = approval.incident_id
        left = False
        try:
            left = self._run(approval, user)
        except Exception as exc:  # the claim is spent: say so on the message, with an id
            if self._cut_short(incident_id, approval.kind, exc):
                return
            error_id = log_internal(exc, f"action {approval.kind} for incident {incident_id}")
            try:
                self.fail(incident_id, f"{approval.kind}: internal error {error_id}")
            except Exception as again:
                if not self._cut_short(incident_id, approval.kind, again):
                    raise
                return
        if left:
            return
        try:
            self.flow_runner.handle(incident_id, ActionFinished(self.clock(), self.bot_user))
        except Exception as exc:
            if not self._cut_short(incident_id, approval.kind, exc):
                raise

    def _cut_short(self, incident_id: str, kind: str, exc: BaseException) -> bool:
        """A Redis refusal: logged as one (not an internal error) and the step handed to
        the reconciler; an incident Redis no longer has (its data was lost: the data-loss
        watch says so in chat) is left; False for anything else."""
        if isinstance(exc, UnknownIncident):
            log.warning("action %s: incident %s is gone from Redis (its data was lost?)",
                        kind, incident_id)
            return True
        why = refusal(exc)
        if why is None:
            return False
        log.warning("action %s for incident %s cut short, Redis refused (%s): %s", kind,
                    incident_id, why, exc)
        if self.cut_short is not None:
            self.cut_short.add(incident_id, why)
        return True

    def recover_stalled(self, max_age_s: float = STALLED_S) -> list[str]:
        """A ``running`` marker left outside an action step, long past every deadline: the
        replica died after a follow-up's click but before ``remediating``, or a read-back
        settled the state and died before its line. Read the host back once and write that
        line (the state stays where it is). An action step (approved, remediating) is in
        flight: the reconciler alone settles it (``settle_interrupted``), so the two never
        both write a line for the same action."""
        stalled = []
        for incident in self.incidents.list(open_only=True):
            running = incident.running
            if (running is None or incident.state in ACTING
                    or self.clock() - running.at < max_age_s):
                continue
            outcome = self._read_back(incident, running)
            self._audit_read_back(incident.id, self.bot_user, "stale running marker", outcome)
            line = ActionReadBack(self.clock(), self.bot_user, incident.state, running,
                                  outcome.text, outcome.result, settles=False)
            try:  # the line and the cleared marker, re-rendered (decided in bot.domain.flow)
                self.flow_runner.handle(incident.id, line)
            except StepTaken:  # another settler wrote its line first
                continue
            stalled.append(incident.id)
        return stalled

    def settle_interrupted(self, incident_id: str, why: str, *,
                           actor: str = READ_BACK_ACTOR, only_if_reachable: bool = False) -> bool:
        """An action step (approved, remediating) whose owner is gone or whose deadline
        passed (the reconciler took it over): read the host back with the action's own
        checks, never run it again. Its effect is there: verified (through remediating
        from approved), with a result line that says it was read back; not there, or the
        host unreachable: ``action_failed`` with Retry. One transition, one line, one
        re-render of the same message; False when someone else settled it first, or a
        pending reboot is the reboot step's to settle."""
        incident = self.incidents.require(incident_id)
        reboot = incident.reboot
        if incident.state not in ACTING or (
                reboot is not None and not reboot.done and self.clock() <= reboot.deadline):
            return False
        running = incident.running
        outcome = self._read_back(incident, running)
        if only_if_reachable and outcome.seen is not None and not outcome.seen.reachable:
            return False  # still silent: read it again next period, until the deadline
        self._audit_read_back(incident_id, actor, why, outcome)
        try:
            self._settle(incident, running, outcome, actor)
        except IllegalTransition:  # the action's own thread (or a person) settled it
            return False
        if outcome.result is not None:
            self._offer_after_read_back(incident_id, outcome.result,
                                        running.approval_id if running is not None else "")
        self.publisher.publish(incident_id)
        return True

    def _read_back(self, incident: Incident, running: Running | None) -> Interrupted:
        """What the host shows for the interrupted action (``bot.flow.readback``)."""
        if running is None:  # approved but never marked running: it never started
            started = incident.state is not IncidentState.APPROVED
            said = strings.FLOW_INTERRUPTED if started else strings.FLOW_READ_BACK_NOT_STARTED
            return Interrupted("action", said.format(kind="action"))
        approval = self.plans.approvals.get(running.approval_id) if running.approval_id else None
        target = self.hosts.target_for(incident.host)
        if approval is None or target is None:
            return Interrupted(running.kind, strings.FLOW_INTERRUPTED.format(kind=running.kind))
        asked = Asked(approval.kind, dict(approval.action.params),
                      running.by, approval.evidence_hash, incident.id)
        seen = read_back(self.runner, target, asked, self.hosts.act_options(incident.host))
        sent = self._sent_before_lost(incident.id)
        if seen.result is not None:
            text = seen.result.summary
            if sent is not None:  # it was the host that stopped, not the bot
                text = text.replace(strings.FLOW_READ_BACK_AFTER_BOT, strings.
                                    FLOW_READ_BACK_AFTER_LOST.format(host=incident.host))
        elif sent is not None:
            said = "; ".join(f"`{c}`" for c in sent) or "nothing"
            text = (strings.FLOW_READ_BACK_LOST_SHOWS.format(kind=asked.kind, host=incident.host,
                                                             sent=said, seen=seen.seen)
                    if seen.reachable else strings.FLOW_STATE_UNKNOWN.format(
                        kind=asked.kind, host=incident.host, sent=said))
        else:
            text = strings.FLOW_READ_BACK_FAILED.format(kind=asked.kind, seen=seen.seen)
        return Interrupted(asked.kind, text, seen)

    def _sent_before_lost(self, incident_id: str) -> list[str] | None:
        """What the action had sent when its host stopped answering (``_host_lost``'s
        audit entry), or None when it was not the host that stopped."""
        lost = [e for e in self.audit.timeline(incident_id) if e.action == "action.interrupted"]
        return [str(c) for c in lost[-1].detail.get("sent") or []] if lost else None

    def _audit_read_back(self, incident_id: str, actor: str, why: str,
                         outcome: Interrupted) -> None:
        detail = {"kind": outcome.kind, "why": why[:200], "text": outcome.text[:500],
                  "ran_again": False}
        if outcome.seen is not None:
            detail.update(outcome.seen.audit_detail())
        self.audit.append(incident_id, actor, "action.read_back", detail)

    def _settle(self, incident: Incident, running: Running | None, outcome: Interrupted,
                actor: str) -> None:
        """The one move out of the action step with its result line (``ActionReadBack``,
        decided in ``bot.domain.flow``); from approved a verified read-back goes through
        remediating first, as the state table does. ``IllegalTransition`` if it moved."""
        unread = outcome.seen is not None and not outcome.seen.reachable
        event = ActionReadBack(self.clock(), actor, incident.state, running, outcome.text,
                               outcome.result,
                               could_not_check=outcome.seen.seen if unread and outcome.seen
                               else "")
        done = self.flow_runner.handle(incident.id, event)
        remediating = IncidentState.REMEDIATING
        if event.seen is IncidentState.APPROVED and done.incident.state is remediating:
            self.flow_runner.handle(incident.id, replace(event, at=self.clock(),
                                                         seen=remediating))

    def _offer_after_read_back(self, incident_id: str, result: ActionResult,
                               step: str = "") -> None:
        """What a verified action offers next (the lasting fix, the host's interrupted
        extraction as a button); no Revert: the state before the action was never read."""
        target = self.hosts.target_for(self.incidents.require(incident_id).host)
        if target is None:
            return
        jobs = self.hosts.interrupted_job_ids(result.host) if frees_gpus(result.kind) else []
        for job in self.followups.offer_followups(incident_id, result, target, jobs[:1],
                                                  follows=step):
            self.followups.offer_resume(incident_id, job, follows=step)

    def fail(self, incident_id: str, text: str) -> None:
        """Record a failure that happened before (or instead of) an action result."""
        self.flow_runner.handle(incident_id, ActionFailed(self.clock(), self.bot_user, text))

    def _run(self, approval: Approval, user: str) -> bool:
        """True when the step was left for a read-back (its host stopped answering)."""
        incident = self.incidents.require(approval.incident_id)
        target, action = self.hosts.target_for(incident.host), approval.action
        if target is None:
            self.fail(incident.id, strings.FLOW_UNKNOWN_HOST.format(host=incident.host))
            return False
        known = find(action.kind)
        if (known is None or known.reprobe_first) and not action.offered:
            fresh = self.hosts.diagnose(incident, target)
            # not checked is not "gone": an unreachable host or a lost session is Could not check
            if cut_off(fresh) or not still_proposed(fresh, action):
                self._not_needed(incident, approval, user, fresh)
                return False
        self.flow_runner.handle(incident.id, ActionStarted(self.clock(), user, action.kind))
        before = self.reboots.boot_id(target) if known is not None and known.reboots else None
        result = self._act(incident, target, approval, user)
        if result is not None and stopped_midway(result):
            self._host_lost(incident, result, user)
            return True
        first = True
        while result is not None:
            if requested(result):  # verified when the host is back (reboot_step)
                self.reboots.on_requested(incident.id, result, before)
                return False
            self._record(incident.id, result)
            if first and result.ok and user.startswith("policy:"):
                self._policy_done(incident.id, approval)
            first = False
            result = self._follow_up(incident.id, result, target, user, approval.id)
        return False

    def _host_lost(self, incident: Incident, result: ActionResult, user: str) -> None:
        """The host stopped answering part-way (issue 39): the step stays ``remediating``
        with its running mark; what was sent is audited and said in the thread; the
        reconciler reads the host back each period once it answers, and at the step's
        deadline settles it from what it shows, or as unknown with what was sent."""
        sent = sent_commands(result.commands)
        entry = self.incidents.inflight.get(incident.id)
        until = entry.deadline if entry is not None else self.clock()
        self.audit.append(incident.id, user, "action.interrupted", {
            "kind": result.kind, "why": "the host stopped answering", "sent": sent,
            "seen": result.summary[:500]})
        self.publisher.reply(incident, strings.FLOW_HOST_LOST.format(
            kind=result.kind, host=incident.host,
            until=time.strftime("%H:%M:%S", time.gmtime(until))))
        if self.cut_short is not None:
            self.cut_short.add(incident.id, "the host stopped answering", wait_for_host=True)

    def _policy_done(self, incident_id: str, approval: Approval) -> None:
        """The policy's "done without a click" note, once the action verified."""
        note = approval.action.policy_note
        if note:
            self.publisher.reply(self.incidents.require(incident_id), note)

    def _act(self, incident: Incident, target: SSHTarget, approval: Approval,
             user: str) -> ActionResult | None:
        """Run the approved action: a resume behind the health gate, anything else as is."""
        action = approval.action
        known: Action | None = find(action.kind)
        if known is not None and known.resumes:
            override = ", ".join(approval.approvers or (user,)) if known.overrides_gate else None
            return self._gated_resume(incident.id, target, action.params["job"], user,
                                      approval.evidence_hash, override)
        if known is not None and known.returns_node and self.slurm is not None:
            node = str(action.params["node"])
            gate = self.slurm.gate_resume(incident.id, target, node)
            if not gate.passed:
                self.fail(incident.id, self.slurm.blocked_text(node, gate))
                self.publisher.reply(incident, self.slurm.blocked_text(node, gate))
                return None
        return execute(self.runner, target, action.kind, dict(action.params),
                       approver=user, evidence_hash=approval.evidence_hash, audit=self.audit,
                       options=self.hosts.act_options(incident.host), incident_id=incident.id)

    def _gated_resume(self, incident_id: str, target: SSHTarget, job: str, user: str,
                      ev_hash: str | None, override: str | None) -> ActionResult | None:
        """The health gate, then the resume: None when the gate blocked it (said, and an
        override offered). An override (its own approval) runs it anyway, audited."""
        gate = self.followups.gate(incident_id, target, job)
        kind = (ResumeOverride if override else ResumeExtraction).kind

        def resume() -> ActionResult:
            return execute(self.runner, target, kind, {"job": job}, approver=user,
                           evidence_hash=ev_hash, audit=self.audit, options=self.options,
                           incident_id=incident_id)

        outcome = gated(gate, resume, override_by=override)
        if outcome.ran:
            if outcome.override_by:
                self.followups.audit_override(incident_id, job, outcome.override_by, gate)
            return outcome.result if isinstance(outcome.result, ActionResult) else None
        self.fail(incident_id, gate.message)
        self.followups.offer_override(incident_id, job, gate)
        return None

    def _not_needed(self, incident: Incident, approval: Approval, user: str,
                    fresh: Diagnosis) -> None:
        """The fresh diagnosis does not propose the action, or lost the host (``cut_off``).
        Read in full: the finding no longer holds, do not act, say what the host looks
        like now. Not read in full (no session, probes that did not answer): could not
        check, nothing ran, Retry."""
        said = action_phrase(approval.action.proposed(), incident.diagnosis)
        why = unread(fresh)
        if why is not None:
            self.flow_runner.handle(incident.id, ReprobeFailed(self.clock(), user, approval.kind,
                                                               why, said))
            return
        now = "; ".join(f.title for f in fresh.findings) or strings.FLOW_NO_FINDINGS
        self.flow_runner.handle(incident.id, ActionNotNeeded(self.clock(), user, approval.kind,
                                                             now, said))

    def _record(self, incident_id: str, result: ActionResult) -> None:
        """Store one result as what verify observed (remediating → verified | failed, the
        thread told): a revert's as a revert."""
        known = find(result.kind)
        observed = RevertObserved if known is not None and known.undoes else ActionObserved
        self.flow_runner.handle(incident_id, observed(self.clock(), self.bot_user, result))

    def _follow_up(self, incident_id: str, result: ActionResult, target: SSHTarget,
                   user: str, step: str = "") -> ActionResult | None:
        """Offer what comes after ``result`` (Revert, a refusal's alternatives, the
        ladder's next rung, the lasting fix: each its own approval, marked as following
        ``step``, the approval that ran it); return the chained resume's result, or None."""
        if result.ok and is_resume(result.kind):
            self._mark_resumed(incident_id, result.params["job"])
            return None
        partial = bool(result.verification and result.verification.evidence.get("partial"))
        known = find(result.kind)
        if known is not None and known.previewed and (result.ok or partial):
            self._offer_other_parts(incident_id, result, target, step)
        if self.slurm is not None and result.ok and known is not None and known.drains:
            self.slurm.after_drain(incident_id, result, target)
        if result.ok and known is not None and known.hands_to_rma:
            self.followups.rma_bundle(incident_id, result)
        if self.slurm is not None and result.ok and known is not None and known.repair:
            # back in service only with proof: the gate since the repair began (kept out:
            # not fixed, decided by the flow), the incident's Xids cleared by it
            self.slurm.after_repair(incident_id, target, since=result.started_at or None,
                                    by=known.clears_xids(result.params))
        freed = result.ok and frees_gpus(result.kind)
        host = self.incidents.require(incident_id).host
        jobs = self.hosts.interrupted_job_ids(host) if freed else []
        resumes = self.followups.offer_followups(incident_id, result, target, jobs[:1],
                                                 follows=step)
        if not resumes:
            return None
        if not self.options.chain_resume:
            self.followups.offer_resume(incident_id, resumes[0], follows=step)
            return None
        incident = self.incidents.require(incident_id)
        return self._gated_resume(incident_id, target, resumes[0], user,
                                  incident.evidence_hash or None, None)

    def _offer_other_parts(self, incident_id: str, result: ActionResult,
                           target: SSHTarget, step: str = "") -> None:
        """After one part of a disk cleanup, the parts it left, each its own approval again
        (the act step's preflight re-checks every file when one is clicked)."""
        stored = self.incidents.require(incident_id).diagnosis
        for action in rest(stored, result.params["paths"]) if stored is not None else []:
            self.followups.offer(incident_id, action, target, follows=step)

    def _mark_resumed(self, incident_id: str, job_id: str) -> None:
        self.jobs.link(job_id, incident_id)
        self.flow_runner.handle(incident_id, ResumeQueued(self.clock(), self.bot_user, job_id))
