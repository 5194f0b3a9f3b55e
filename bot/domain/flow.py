"""The flow's decisions as one pure function: ``decide(incident, event) -> (incident, effects)``.

An event is something that happened to an incident: its alert opened or cleared, a
diagnosis finished or failed, an approval was clicked, denied or expired, an action
started, was observed by its verification (a revert's undoing the step it followed), was
found not needed by a re-probe that read the host, or could not be checked because the
re-probe could not read it, or failed before it ran, the health gate observed the host
before a return to service, a follow-up was offered, more alerts folded into an Xid
storm's tally, another host joined its group, an extraction's resume was queued (its
progress shown, its job ended), its card was delivered to chat, the reconciler found its
step abandoned, an interrupted action was read back from the host, a reboot was sent,
settled or followed on the host's other incidents, a drained Slurm node has nothing
running any more, a person acked, resolved, snoozed or retried. An effect is what must
happen because of it: the transition's audit line (written with the record), the message
re-rendered, a reply in the thread, a diagnosis or an action run, the other pending
approvals withdrawn, approvals told which message holds their buttons, an audit entry, an
announcement on the events stream, the closing note. ``decide`` does no I/O: the runner
(``bot/flow/runner.py``) loads the incident once, calls it, commits the new record once
and applies the effects; what an effect finds out comes back as the next event.

The state table (``bot/domain/lifecycle.py``) guards every change: ``apply_transition``
raises ``IllegalTransition`` and nothing is written. An event that no longer applies
(a duplicate delivery, a click on a resolved incident) either raises ``StepTaken`` (the
caller skips it, as before) or changes nothing and says why (``Refused``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bot.core import mrkdwn, strings
from bot.domain.action_result import ActionResult, Outcome, Seen, Verification
from bot.domain.approval import Approval
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.hardware import outlasting
from bot.domain.incident import Incident, apply_transition
from bot.domain.incident_record import (
    ActionPlan,
    ChatRefs,
    GateRecord,
    HostRebootMark,
    LastOutcome,
    ProbeOutput,
    ProgressTracker,
    RebootPending,
    Running,
    Snooze,
    StepResult,
)
from bot.domain.kinds import playbook_for
from bot.domain.lifecycle import (
    ACTING,
    FIRST_DIAGNOSIS,
    MAX_SNOOZE_S,
    SNOOZABLE,
    IllegalTransition,
    IncidentState,
    StepTaken,
    can_transition,
)
from bot.domain.xid_storm import cleared

S = IncidentState
# a click on a button of a denied, expired, resolved or busy incident runs nothing
ACTABLE = frozenset({S.AWAITING_APPROVAL, S.VERIFIED, S.ACTION_FAILED, S.RESUMED})
# where an approved follow-up (Revert, Resume) starts acting from, besides approved
FOLLOW_UP_FROM = frozenset({S.VERIFIED, S.ACTION_FAILED, S.RESUMED})
RETRYABLE = frozenset({S.DIAGNOSIS_FAILED, S.ACTION_FAILED, S.DENIED, S.EXPIRED, S.NO_ACTION})
INTERNAL_ERROR = "bot.internal_error"
ACCEPTED_KEPT = 32  # approvals an incident remembers accepting: far more than it ever offers


# --- events -----------------------------------------------------------------------------

@dataclass(frozen=True)
class FlowEvent:
    """Something that happened to one incident, at ``at`` (the record's clock), seen or
    done by ``by`` (a user id, or the bot's own name)."""

    at: float
    by: str


@dataclass(frozen=True)
class AlertOpened(FlowEvent):
    """``incident.opened`` (or the reconciler's re-drive of it): the first diagnosis.
    ``alert_card``: post the alert card while it runs."""

    alert_card: bool = True


@dataclass(frozen=True)
class RetryAsked(AlertOpened):
    """Diagnose again now: a person's Retry (off the click), ``/ir diag``, a host back
    from a reboot."""


@dataclass(frozen=True)
class RetryClicked(FlowEvent):
    """A person asked for Retry: the pending approvals go, and the diagnosis runs again
    off the click (``Rediagnose``)."""


@dataclass(frozen=True)
class DiagnosisFinished(FlowEvent):
    """The playbook's findings and the plans (pending approvals) made from them."""

    diagnosis: Diagnosis
    plans: tuple[ActionPlan, ...]
    evidence_hash: str
    probe_output: tuple[ProbeOutput, ...] = ()
    evidence: bool = False  # the evidence goes to the thread with this render


@dataclass(frozen=True)
class DiagnosisFailed(FlowEvent):
    """An error of ours while diagnosing (target, probes, planning, rendering); the plans
    it made were withdrawn (by the diagnosis's executor, before this is recorded)."""

    error_id: str


@dataclass(frozen=True)
class ApprovalClicked(FlowEvent):
    """The click that won the approval's atomic claim (``by`` is the approver, or
    ``policy:<name>`` for a fleet policy's automatic approval). ``said``: the action in
    the words a person reads (its own, ``Action.phrase``), never its kind."""

    approval: Approval
    said: str = ""


@dataclass(frozen=True)
class ApprovalDenied(FlowEvent):
    approval: Approval
    reason: str = ""
    said: str = ""  # the action in words


@dataclass(frozen=True)
class ApprovalExpired(FlowEvent):
    approval: Approval


@dataclass(frozen=True)
class ActionStarted(FlowEvent):
    """The approved action is about to change the host (after its re-probe)."""

    kind: str


@dataclass(frozen=True)
class ActionObserved(FlowEvent):
    """An action ran, and its verification observed what is in ``result``."""

    result: ActionResult


@dataclass(frozen=True)
class RevertObserved(ActionObserved):
    """A revert ran (an action that undoes an earlier fix), as its verification saw it."""


@dataclass(frozen=True)
class ActionNotNeeded(FlowEvent):
    """The fresh diagnosis (one that read the host in full) no longer proposes the
    approved action: nothing ran."""

    kind: str
    now: str  # what the host looks like now, in the findings' words
    said: str = ""  # the action in words


@dataclass(frozen=True)
class ReprobeFailed(FlowEvent):
    """The fresh diagnosis before acting could not read the host (refused connection,
    timeout, host key changed, probes that did not answer): nothing ran, and nothing is
    known of whether the finding still holds. Could not check, never "no longer holds"."""

    kind: str
    why: str  # what failed, in the transport's or the tool's words
    said: str = ""  # the action in words


@dataclass(frozen=True)
class ActionFailed(FlowEvent):
    """A failure before (or instead of) an action result: said, and the step failed."""

    text: str


@dataclass(frozen=True)
class GateObserved(FlowEvent):
    """The health gate ran on the host before a return to service (an extraction's
    resume, a Slurm node, a verified repair closed as fixed), and ``gate`` is what each
    level observed. ``message``: the gate's own words for the thread; ``say``: False when
    a failure is the caller's to word (a drained node stays drained). ``repair``: it gates
    a repaired host (a verified reset or reboot); ``rma``: the node is on the RMA list and
    stays out whatever the levels said (why, in words); ``cleared_by``: the repair that
    cleared the incident's Xid tallies, whatever the gate says."""

    gate: GateRecord
    message: str
    say: bool = True
    repair: bool = False
    rma: str = ""
    cleared_by: str = ""


@dataclass(frozen=True)
class XidsFolded(FlowEvent):
    """More alerts folded into the incident's Xid tallies (the planner wrote the count):
    its message shows "Xid 45 ×224 since 10:02 UTC", edited in place."""


@dataclass(frozen=True)
class HostGrouped(FlowEvent):
    """Another host joined the group this incident is the parent of (``child``, its own
    incident, diagnosed in the parent's thread): the host list on the message grew."""

    child: str


@dataclass(frozen=True)
class ResumeQueued(FlowEvent):
    """The extraction's next run is queued (and linked to the incident)."""

    job_id: str


@dataclass(frozen=True)
class CardDelivered(FlowEvent):
    """The incident's card is in chat (whichever replica or retry delivered it): where it
    is (``chat``: channel, message, the thread it sits in), so later steps edit that same
    message and its buttons know their message. Reported by the chat outbox; the chat
    layer itself never writes the incident."""

    chat: ChatRefs


@dataclass(frozen=True)
class StepAbandoned(FlowEvent):
    """The reconciler found the incident's transient step abandoned (its owner gone or its
    deadline passed): ``state`` and ``attempts`` as its in-flight entry read when the
    sweep looked (the runner's commit re-checks that entry under WATCH and raises
    ``StepTaken`` when it changed). ``max_attempts``: interruptions of a diagnosis before
    it gives up; ``hold_s``: how long the reconciler owns an action step while it reads
    the host back."""

    state: IncidentState
    attempts: int
    reason: str
    max_attempts: int = 3
    hold_s: float = 120.0


@dataclass(frozen=True)
class ActionReadBack(FlowEvent):
    """An interrupted action read back from the host, never run again
    (``bot/flow/readback.py``): ``result`` is the verified outcome when its effect is
    there (None: not there, or the host could not be read, in ``text``). ``settles``: the
    action step (approved, remediating) it settles, as ``seen`` when the read-back looked
    (``StepTaken`` when it moved); False: a ``running`` marker left outside an action
    step, whose line only is written. Either way the line goes only while ``running`` is
    still the marker the read-back saw: a second settler writes none."""

    seen: IncidentState
    running: Running | None
    text: str
    result: ActionResult | None = None
    settles: bool = True
    could_not_check: str = ""  # what failed when the host could not be read (issue 35)


@dataclass(frozen=True)
class RebootRequested(FlowEvent):
    """A reboot was sent (``result``; ``by`` is its approver): it cannot be verified yet,
    so the step stays remediating with ``reboot`` pending and its line (``text``) says so
    in the thread."""

    result: ActionResult
    reboot: RebootPending
    text: str


@dataclass(frozen=True)
class RebootSettled(FlowEvent):
    """The pending reboot is over (``reboot`` done, with the boot id after; None: the host
    was not back by its deadline): verified when the host is back without the problem
    (``ok``), else ``action_failed``, ``text`` saying which."""

    reboot: RebootPending
    ok: bool
    text: str


@dataclass(frozen=True)
class HostRebootMarked(FlowEvent):
    """Another incident of this host rebooted it (``mark``): said in its thread (``text``);
    it is re-diagnosed once the host is back."""

    mark: HostRebootMark
    text: str


@dataclass(frozen=True)
class RebootFollowed(FlowEvent):
    """The host another incident rebooted is back: its mark settled (``mark``), and with
    ``fresh`` (a diagnosis without problems) the incident resolved, ``text`` its line."""

    mark: HostRebootMark
    fresh: Diagnosis | None = None
    text: str = ""


@dataclass(frozen=True)
class NodeDrained(FlowEvent):
    """The Slurm node the incident's drain left DRAINING is DRAINED now (nothing runs
    there): ``text`` says so, under the message's results and in the thread."""

    node: str
    text: str


@dataclass(frozen=True)
class ProgressShown(FlowEvent):
    """A resumed extraction's progress as its one thread message shows it now
    (``tracker``: the moving-average window, where the message is, what it last said)."""

    tracker: ProgressTracker


@dataclass(frozen=True)
class ExtractionFinished(FlowEvent):
    """The resumed extraction's job ended (its closing line is in the thread): resolved
    when it ``completed``, else ``action_failed``; ``summary`` is the reason."""

    completed: bool
    summary: str


@dataclass(frozen=True)
class PlanOffered(FlowEvent):
    """A follow-up's approval (``plan``) offered on the incident's message: among its
    plans, or as its Revert (``revert``: shown apart, ``keep`` an earlier Revert still
    pending that goes back among the plans)."""

    plan: ActionPlan
    revert: bool = False
    keep: ActionPlan | None = None


@dataclass(frozen=True)
class ActionFinished(FlowEvent):
    """The approval's action step is over (whatever happened): its mark goes."""


@dataclass(frozen=True)
class AlertCleared(FlowEvent):
    """The incident resolved (its alert cleared, or a person or the flow resolved it):
    the flow re-renders it and posts the closing note. Or its alert cleared and it stayed
    open (``Incident.cleared_at``: a hardware fault outlives its alert): the message says
    the alert cleared and the fault is still there."""


@dataclass(frozen=True)
class Acked(FlowEvent):
    pass


@dataclass(frozen=True)
class ResolveAsked(FlowEvent):
    pass


@dataclass(frozen=True)
class SnoozeAsked(FlowEvent):
    duration_s: int


@dataclass(frozen=True)
class SnoozeEnded(FlowEvent):
    pass


@dataclass(frozen=True)
class EscalateAsked(FlowEvent):
    pass


# --- effects ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Effect:
    """Something to do because of an event."""


@dataclass(frozen=True)
class Transitioned(Effect):
    """The state change's audit line (and its in-flight owner), written with the record in
    the same transaction: the one effect storage applies itself."""

    actor: str
    reason: str
    evidence_hash: str | None = None


@dataclass(frozen=True)
class StepRedriven(Effect):
    """The abandoned step's in-flight entry re-driven in the same transaction as the record
    (storage applies it, as it does ``Transitioned``), one attempt more and audited
    ``incident.redriven``: released for anyone to claim with a fresh deadline
    (``hold_s`` None), or held by the committing owner for ``hold_s`` while the
    reconciler reads the action back (so no second sweep does it too)."""

    actor: str
    reason: str
    hold_s: float | None = None


class Then(StrEnum):
    """What the reconciler does after its event is committed."""

    REDIAGNOSE = "rediagnose"  # re-send the alert: a diagnosis only reads the host
    READ_BACK = "read_back"  # settle the action from what the host shows, never run it again
    GAVE_UP = "gave_up"  # diagnosis_failed with Retry: nothing more to do
    DROP = "drop"  # the entry outlived its state: remove it, nothing to re-drive


@dataclass(frozen=True)
class SweepNext(Effect):
    """Handed back to the reconciler (the runner does not run it): what to do next, and
    why (the reason it saw, or the words it gave up with)."""

    then: Then
    reason: str


@dataclass(frozen=True)
class PostMessage(Effect):
    """Render the stored incident and post it, or edit its message."""

    evidence: bool = False  # its evidence goes to the thread now (first full render)
    required: bool = True  # False: best effort (the early alert card; the outcome posts it)


@dataclass(frozen=True)
class ReplyInThread(Effect):
    text: str
    code: str | None = None
    # one purpose is one message (a second reply with it edits the first): a reply that an
    # event delivered again would repeat names one, so it is said once
    purpose: str = ""


@dataclass(frozen=True)
class SayResult(Effect):
    """The action's result line in the thread, with the commands it ran."""

    result: ActionResult


@dataclass(frozen=True)
class RunDiagnosis(Effect):
    evidence: bool = False  # the alert card went out first: its evidence follows later


@dataclass(frozen=True)
class Rediagnose(Effect):
    """Diagnose again off the click (``RetryAsked`` in the action executor)."""


@dataclass(frozen=True)
class RunAction(Effect):
    """Run the approved action off the click (the action executor)."""

    approval: Approval
    user: str


@dataclass(frozen=True)
class WithdrawPending(Effect):
    """Cancel the incident's other pending approvals (``keep``: the one clicked); with
    ``only``, just those approvals (a revert's: the follow-ups of the step it undid)."""

    actor: str
    reason: str
    keep: str = ""
    only: tuple[str, ...] | None = None


@dataclass(frozen=True)
class AttachApprovals(Effect):
    """Tell these approvals which message holds their buttons (expiry edits it)."""

    approval_ids: tuple[str, ...]
    channel: str
    ts: str


@dataclass(frozen=True)
class Audit(Effect):
    actor: str
    action: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Announce(Effect):
    """An incident-level decision on the events stream (escalation listens for
    ``incident.ack``), audited with its user and time."""

    event: str
    user: str
    at: float
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClosingNote(Effect):
    """The resolved incident's timeline, short, in its thread."""


@dataclass(frozen=True)
class Refused(Effect):
    """What the person who asked is told: nothing happened, and why."""

    text: str


@dataclass(frozen=True)
class Told(Effect):
    """What the person who asked is told: it was done."""

    text: str


Decision = tuple[Incident, tuple[Effect, ...]]


# --- the decisions ------------------------------------------------------------------------

def decide(incident: Incident, event: FlowEvent) -> Decision:
    """The new incident and what must happen, for ``event`` on ``incident`` (pure).
    Raises ``IllegalTransition`` (``StepTaken`` for a step no longer waiting) when the
    event cannot apply; nothing is written then."""
    for kind in type(event).__mro__:
        handler = _HANDLERS.get(kind)
        if handler is not None:
            return handler(incident, event)
    raise TypeError(f"no decision for {type(event).__name__}")


def outcome_state(diagnosis: Diagnosis, n_plans: int) -> IncidentState:
    """Where a finished diagnosis leaves the incident: no SSH session → diagnosis_failed
    (Retry); findings but nothing to run → no_action (Resolve); proposed actions →
    awaiting_approval; a healthy host → resolved."""
    if diagnosis.status is DiagnosisStatus.UNREACHABLE:
        return S.DIAGNOSIS_FAILED
    if n_plans:
        return S.AWAITING_APPROVAL
    return S.NO_ACTION if diagnosis.findings else S.RESOLVED


def _move(incident: Incident, goal: IncidentState, at: float, actor: str, reason: str,
          evidence_hash: str | None = None) -> tuple[Incident, Transitioned]:
    return apply_transition(incident, goal, at), Transitioned(actor, reason, evidence_hash)


def _diagnosing(incident: Incident, at: float, by: str, reason: str) -> Decision:
    """Into diagnosing; the same state again is a claim on the step (storage decides it
    from the owner and the deadline), written as a re-entry."""
    if incident.state is S.DIAGNOSING:
        return replace(incident, updated=at), (Transitioned(by, reason),)
    new, moved = _move(incident, S.DIAGNOSING, at, by, reason)
    return new, (moved,)


def _alert_opened(incident: Incident, event: AlertOpened) -> Decision:
    if incident.state not in FIRST_DIAGNOSIS:
        raise StepTaken(incident.id, incident.state, "no longer waiting for this step")
    new, moved = _diagnosing(incident, event.at, event.by, "alert received")
    first = event.alert_card and incident.diagnosis is None
    card = (PostMessage(required=False),) if first else ()
    return new, (*moved, *card, RunDiagnosis(evidence=first))


def _retry_asked(incident: Incident, event: RetryAsked) -> Decision:
    """As the first diagnosis, from any state the table lets into diagnosing."""
    new, moved = _diagnosing(incident, event.at, event.by, "alert received")
    first = event.alert_card and incident.diagnosis is None
    card = (PostMessage(required=False),) if first else ()
    return new, (*moved, *card, RunDiagnosis(evidence=first))


def _diagnosis_finished(incident: Incident, event: DiagnosisFinished) -> Decision:
    if incident.state is not S.DIAGNOSING:
        raise IllegalTransition(incident.state, outcome_state(event.diagnosis, len(event.plans)))
    d = event.diagnosis
    stored = replace(incident, diagnosis=d, plans=event.plans, evidence_hash=event.evidence_hash,
                     results=(), last_outcome=None, revert_plan=None, running=None,
                     probe_output=event.probe_output)
    reason = f"{len(d.findings)} findings, {len(event.plans)} proposed actions"
    new, moved = _move(stored, outcome_state(d, len(event.plans)), event.at, event.by, reason,
                       event.evidence_hash)
    return new, (moved, PostMessage(evidence=event.evidence))


def _diagnosis_failed(incident: Incident, event: DiagnosisFailed) -> Decision:
    """``diagnosis_failed`` naming the error id, with Retry; the message says so. A failure
    that arrives after the incident moved on (another replica's diagnosis won, a person
    resolved it) is stale: it changes nothing, since wiping the plans and the running step
    of a live incident for an old error would put a false word on its message."""
    if not can_transition(incident.state, S.DIAGNOSIS_FAILED):
        return incident, ()
    title = strings.FLOW_DIAGNOSIS_ERROR.format(error_id=event.error_id)
    failed = Diagnosis(incident.host, playbook_for(incident.kind), DiagnosisStatus.UNREACHABLE,
                       0.0, (Finding(INTERNAL_ERROR, Severity.WARNING, title),))
    new = replace(incident, diagnosis=failed, plans=(), results=(), running=None,
                  updated=event.at)
    new, moved = _move(new, S.DIAGNOSIS_FAILED, event.at, event.by, title)
    return new, (moved, PostMessage())


def _approval_clicked(incident: Incident, event: ApprovalClicked) -> Decision:
    """Accept the claimed approval (the message says running) and run it off the click;
    a click on an incident that resolved or moved on runs nothing and says why."""
    approval, user = event.approval, event.by
    if approval.id in incident.accepted or (
            incident.running is not None and incident.running.approval_id == approval.id):
        # the click event delivered again (its consumer died before the ack): it runs or ran
        raise StepTaken(incident.id, incident.state, f"approval {approval.id} was accepted")
    if incident.state not in ACTABLE or incident.running is not None:
        text = strings.FLOW_NOT_ACTABLE.format(kind=event.said or approval.kind, id=incident.id,
                                               state=incident.state.value)
        return incident, (Audit(user, "action.skipped", {"reason": text[:500]}),
                          ReplyInThread(text), Refused(text))
    new, effects = incident, []
    if incident.state is S.AWAITING_APPROVAL:
        new, moved = _move(incident, S.APPROVED, event.at, user, f"approved {approval.kind}",
                           approval.evidence_hash)
        effects += [moved, WithdrawPending(user, strings.WITHDRAWN_REASON, keep=approval.id)]
    new = replace(new, running=Running(approval.kind, user, event.at, approval.id, event.said),
                  accepted=(*incident.accepted, approval.id)[-ACCEPTED_KEPT:], updated=event.at)
    return new, (*effects, PostMessage(), RunAction(approval, user))


def _approval_denied(incident: Incident, event: ApprovalDenied) -> Decision:
    new, effects = incident, []
    if incident.state is S.AWAITING_APPROVAL:
        new, moved = _move(incident, S.DENIED, event.at, event.by, event.reason or "denied")
        effects += [moved, WithdrawPending(event.by, f"denied {event.approval.kind}")]
    text = strings.FLOW_DENIED.format(user=mrkdwn.mention(event.by),  # a mention: <@U…>
                                      kind=event.said or mrkdwn.escape(event.approval.kind),
                                      reason=mrkdwn.escape(event.reason or "-"))
    # the click's event delivered again (its consumer died before the ack) says it once
    return new, (*effects, ReplyInThread(text, purpose=f"denied:{event.approval.id}"),
                 PostMessage())


def _approval_expired(incident: Incident, event: ApprovalExpired) -> Decision:
    new, effects = incident, []
    if incident.state is S.AWAITING_APPROVAL:
        new, moved = _move(incident, S.EXPIRED, event.at, event.by, "approval expired")
        effects += [moved, WithdrawPending(event.by, "approval expired")]
    return new, (*effects, PostMessage())


def _action_started(incident: Incident, event: ActionStarted) -> Decision:
    """First action: approved → remediating; a follow-up (Revert, Resume) goes there from
    verified, action_failed or resumed."""
    if incident.state is S.APPROVED:
        new, moved = _move(incident, S.REMEDIATING, event.at, event.by, "acting")
        return new, (moved,)
    if incident.state in FOLLOW_UP_FROM:
        new, moved = _move(incident, S.REMEDIATING, event.at, event.by,
                           f"follow-up {event.kind} approved")
        return new, (moved,)
    return incident, ()


def _action_observed(incident: Incident, event: ActionObserved) -> Decision:
    """The result stored with what verify saw; remediating → verified when it held, else
    action_failed; the thread gets the result line and the commands."""
    result = event.result
    new = replace(incident.with_result(StepResult.of(result)),
                  last_outcome=LastOutcome.of(result), updated=event.at)
    effects: list[Effect] = []
    if incident.state is S.REMEDIATING:
        goal = S.VERIFIED if result.ok else S.ACTION_FAILED
        new, moved = _move(new, goal, event.at, event.by, result.summary)
        effects.append(moved)
    return new, (*effects, SayResult(result))


def _revert_observed(incident: Incident, event: RevertObserved) -> Decision:
    """A revert, as its verify saw it: stored and moved on as any result; the step it
    undid is marked undone (so its fix no longer counts) and the follow-ups that step
    offered (the lasting fix, a resume, its other reverts) are withdrawn: they were
    offered for a host that is no longer as that step left it."""
    new, effects = _action_observed(incident, event)
    running = incident.running
    reverting = _plan_of(incident, running.approval_id) if running is not None else None
    if reverting is None or not reverting.follows:
        return new, effects
    undone = reverting.follows
    result = event.result
    if result.ok:
        new = replace(new, plans=tuple(replace(p, undone=True) if p.approval_id == undone else p
                                       for p in new.plans))
    ran = result.ok or any(c.ran for c in result.commands)
    followers = tuple(i for i in _followers(incident, undone) if i != reverting.approval_id)
    if not ran or not followers:
        return new, effects
    withdraw = WithdrawPending(event.by, strings.FLOW_REVERT_WITHDREW, only=followers)
    return new, (*effects, withdraw)


def _plan_of(incident: Incident, approval_id: str) -> ActionPlan | None:
    plans = (*incident.plans, *((incident.revert_plan,) if incident.revert_plan else ()))
    return next((p for p in plans if p.approval_id == approval_id), None)


def _followers(incident: Incident, step: str) -> list[str]:
    """The approvals offered after ``step``, and after those, in order."""
    plans = (*incident.plans, *((incident.revert_plan,) if incident.revert_plan else ()))
    out: list[str] = []
    frontier = {step}
    while frontier:
        nxt = [p.approval_id for p in plans if p.follows in frontier and p.approval_id not in out]
        out += nxt
        frontier = set(nxt)
    return out


def _reprobe_failed(incident: Incident, event: ReprobeFailed) -> Decision:
    """The host could not be read before acting: nothing ran; could not check, with what
    failed; action_failed, so Retry diagnoses again once the host answers."""
    text = strings.FLOW_REPROBE_FAILED.format(kind=event.said or event.kind, why=event.why)
    new = replace(incident.with_result(StepResult(False, text)),
                  last_outcome=LastOutcome(text, could_not_check=event.why), updated=event.at)
    effects: list[Effect] = [Audit(event.by, "action.skipped",
                                   {"reason": "could not check", "why": event.why[:500]})]
    if incident.state is S.APPROVED:
        new, moved = _move(new, S.ACTION_FAILED, event.at, event.by, text[:200])
        effects.insert(0, moved)
    return new, (*effects, ReplyInThread(strings.FLOW_REPROBE_SAID.format(text=text)))


def _action_not_needed(incident: Incident, event: ActionNotNeeded) -> Decision:
    """The finding no longer holds: nothing runs; the thread says what the host shows."""
    text = strings.FLOW_NOT_ACTING.format(kind=event.said or event.kind, now=event.now)
    new = replace(incident, results=(StepResult(True, text),), updated=event.at)
    effects: list[Effect] = [Audit(event.by, "action.skipped",
                                   {"reason": "finding no longer holds", "now": event.now[:500]})]
    if incident.state is S.APPROVED:
        new, moved = _move(new, S.RESOLVED, event.at, event.by, "finding no longer holds")
        effects.insert(0, moved)
    return new, (*effects, ReplyInThread(text))


def _action_failed(incident: Incident, event: ActionFailed) -> Decision:
    new = replace(incident.with_result(StepResult(False, event.text)),
                  last_outcome=LastOutcome(event.text), updated=event.at)
    if incident.state in (S.APPROVED, S.REMEDIATING):
        new, moved = _move(new, S.ACTION_FAILED, event.at, event.by, event.text[:200])
        return new, (moved,)
    return new, ()


def _gate_observed(incident: Incident, event: GateObserved) -> Decision:
    """The gate's record stored and audited, its words in the thread. A repair the gate
    keeps out (a failed level, or a node on the RMA list) is not fixed: the reason is its
    outcome and a verified incident goes to action_failed; a passed one is re-rendered,
    fixed as its verification said."""
    gate = event.gate
    new = replace(incident, gate=gate, updated=event.at)
    if event.cleared_by and new.xids:
        new = replace(new, xids=cleared(new.xids, event.cleared_by, event.at))
    effects: list[Effect] = [Audit(event.by, "gate.passed" if gate.passed else "gate.failed",
                                   gate.to_json())]
    if gate.passed or event.say:
        effects.append(ReplyInThread(event.message))
    if not event.repair:
        return new, tuple(effects)
    if gate.passed:
        return new, (*effects, PostMessage())
    why = event.rma or strings.REPAIR_KEPT_OUT_GATE.format(
        host=gate.host, reached=gate.reached, reasons="; ".join(gate.reasons[:4]) or "unknown")
    effects.append(Audit(event.by, "repair.kept_out", {
        "reasons": list(gate.reasons[:10]), "reached": gate.reached, "rma": bool(event.rma)}))
    new = replace(new, last_outcome=LastOutcome(why))
    if incident.state is S.VERIFIED:
        new, moved = _move(new, S.ACTION_FAILED, event.at, event.by, why[:200])
        effects.insert(0, moved)
    if event.say:
        effects.append(ReplyInThread(why))
    return new, (*effects, PostMessage())


def _xids_folded(incident: Incident, event: XidsFolded) -> Decision:
    """The count edited on the message people already see; before it is posted (or
    without a tally) nothing is said: the first post shows the count."""
    if incident.xids and incident.chat is not None:
        return incident, (PostMessage(),)
    return incident, ()


def _host_grouped(incident: Incident, event: HostGrouped) -> Decision:
    """The parent re-rendered with its new host; nothing of it changes."""
    return incident, (PostMessage(),)


def _resume_queued(incident: Incident, event: ResumeQueued) -> Decision:
    new = replace(incident, job_id=event.job_id, updated=event.at)
    if incident.state is S.VERIFIED:
        new, moved = _move(new, S.RESUMED, event.at, event.by,
                           f"extraction {event.job_id} resumed")
        return new, (moved,)
    return new, ()


def _card_delivered(incident: Incident, event: CardDelivered) -> Decision:
    """Keep where the card is when that changed (an edit of a known card changes
    nothing), and attach the plans' approvals to that message either way: a plan offered
    after the first delivery learns its message from the next edit."""
    new = incident
    if incident.chat != event.chat:
        new = replace(incident, chat=event.chat, updated=event.at)
    ids = tuple(plan.approval_id for plan in new.plans)
    attach = (AttachApprovals(ids, event.chat.channel, event.chat.ts),) if ids else ()
    return new, attach


def _step_abandoned(incident: Incident, event: StepAbandoned) -> Decision:
    """Every incident settles. An action step is never run twice: taken over and read back
    from the host. A diagnosis is re-driven (it only reads), until ``max_attempts``
    interruptions leave it ``diagnosis_failed`` with the reason and Retry. An entry whose
    incident is elsewhere is only dropped."""
    if incident.state is not event.state:
        return incident, (SweepNext(Then.DROP, event.reason),)
    if event.state in ACTING:
        return incident, (StepRedriven(event.by, event.reason, hold_s=event.hold_s),
                          SweepNext(Then.READ_BACK, event.reason))
    interrupted = event.attempts + 1
    if interrupted >= event.max_attempts:
        text = strings.FLOW_DIAGNOSIS_INTERRUPTED.format(n=interrupted)
        failed = replace(incident, last_outcome=LastOutcome(text))
        new, moved = _move(failed, S.DIAGNOSIS_FAILED, event.at, event.by, text)
        return new, (moved, PostMessage(), SweepNext(Then.GAVE_UP, text))
    return incident, (StepRedriven(event.by, event.reason),
                      SweepNext(Then.REDIAGNOSE, event.reason))


def _action_read_back(incident: Incident, event: ActionReadBack) -> Decision:
    """One step out of the action step, decided by what the host showed: verified (from
    approved through remediating first: the table has no shorter way, so the caller sends
    the event again from there), or ``action_failed`` with Retry; the result line with the
    final move. A stale marker outside an action step gets its line only, re-rendered
    here; the settle's re-render is the caller's, after it offered what follows."""
    if not event.settles:
        if incident.running != event.running:
            raise StepTaken(incident.id, incident.state, "its running marker was settled")
        return _read_back_line(incident, event), (PostMessage(),)
    if incident.state is not event.seen or incident.state not in ACTING:
        raise StepTaken(incident.id, incident.state, "no longer waiting for this step")
    if event.result is None:
        new, moved = _move(_read_back_line(incident, event), S.ACTION_FAILED, event.at,
                           event.by, event.text[:200])
    elif incident.state is S.APPROVED:
        new, moved = _move(incident, S.REMEDIATING, event.at, event.by,
                           "read back after an interruption")
    else:
        new, moved = _move(_read_back_line(incident, event), S.VERIFIED, event.at, event.by,
                           event.text[:200])
    return new, (moved,)


def _read_back_line(incident: Incident, event: ActionReadBack) -> Incident:
    """The read-back's result line and last outcome, the marker cleared, while the marker
    is the one it saw."""
    if incident.running != event.running:
        return incident
    if event.result is not None:
        line, last = StepResult.of(event.result), LastOutcome.of(event.result)
    else:  # not there, or could not check (the host could not be read): never a verdict
        line = StepResult(False, event.text)
        last = LastOutcome(event.text, could_not_check=event.could_not_check)
    return replace(incident.with_result(line), last_outcome=last, running=None,
                   updated=event.at)


def _reboot_requested(incident: Incident, event: RebootRequested) -> Decision:
    new = replace(incident.with_result(StepResult(True, event.text)), reboot=event.reboot,
                  last_outcome=LastOutcome.of(event.result), updated=event.at)
    detail = {"host": incident.host, "boot_id": event.reboot.boot_id}
    return new, (Audit(event.by, "host.reboot_requested", detail), ReplyInThread(event.text))


def _reboot_settled(incident: Incident, event: RebootSettled) -> Decision:
    """Only the step that waits for it (remediating) settles; its line with the move."""
    if incident.state is not S.REMEDIATING:
        raise StepTaken(incident.id, incident.state, "no reboot step waiting to settle")
    done = replace(incident.with_result(StepResult(event.ok, event.text)), reboot=event.reboot,
                   last_outcome=rebooted(incident.last_outcome, event.reboot.boot_id_after,
                                         event.ok, event.text))
    goal = S.VERIFIED if event.ok else S.ACTION_FAILED
    new, moved = _move(done, goal, event.at, event.by, event.text[:200])
    detail = {"boot_id_after": event.reboot.boot_id_after, "ok": event.ok,
              "text": event.text[:500]}
    return new, (moved, Audit(event.by, "host.reboot_settled", detail),
                 ReplyInThread(event.text), PostMessage())


def rebooted(last: LastOutcome | None, now_id: str | None, ok: bool,
             text: str) -> LastOutcome | None:
    """The reboot's result as it was seen once the host was back (the problem gone:
    fixed; still there: not fixed) or never came back (could not check)."""
    result = last.result if last is not None else None
    if result is None:
        return last
    seen = Seen.COULD_NOT_CHECK if now_id is None else Seen.of(ok)
    outcome = {Seen.FIXED: Outcome.SUCCEEDED, Seen.NOT_FIXED: Outcome.FAILED,
               Seen.COULD_NOT_CHECK: Outcome.COULD_NOT_CHECK}[seen]
    why = text if seen is Seen.COULD_NOT_CHECK else ""
    verification = Verification(seen, text, evidence={"boot_id_after": now_id}, why=why)
    return LastOutcome.of(replace(result, outcome=outcome, summary=text,
                                  verification=verification))


def _host_reboot_marked(incident: Incident, event: HostRebootMarked) -> Decision:
    new = replace(incident, host_reboot=event.mark, updated=event.at)
    return new, (ReplyInThread(event.text), PostMessage())


def _reboot_followed(incident: Incident, event: RebootFollowed) -> Decision:
    """The mark settled; resolved (with the fresh diagnosis and its line) when its
    problems are gone and the table still lets it resolve."""
    new = replace(incident, host_reboot=event.mark, updated=event.at)
    if event.fresh is None or not can_transition(incident.state, S.RESOLVED):
        return new, ()
    gone = replace(new.with_result(StepResult(True, event.text)), diagnosis=event.fresh)
    new, moved = _move(gone, S.RESOLVED, event.at, event.by, event.text[:200])
    return new, (moved, ReplyInThread(event.text), PostMessage())


def _node_drained(incident: Incident, event: NodeDrained) -> Decision:
    """The line on the message and in the thread; the caller offers the repair (a reboot,
    now that nothing runs there) and re-renders."""
    new = replace(incident.with_result(StepResult(True, event.text)), updated=event.at)
    return new, (ReplyInThread(event.text),)


def _progress_shown(incident: Incident, event: ProgressShown) -> Decision:
    return replace(incident, progress=event.tracker, updated=event.at), ()


def _extraction_finished(incident: Incident, event: ExtractionFinished) -> Decision:
    """Only the resumed incident the job belongs to ends with it (``StepTaken`` once it
    moved on: a person resolved it, a follow-up is running)."""
    if incident.state is not S.RESUMED:
        raise StepTaken(incident.id, incident.state, "no resumed extraction to end")
    goal = S.RESOLVED if event.completed else S.ACTION_FAILED
    new, moved = _move(incident, goal, event.at, event.by, event.summary)
    return new, (moved,)


def _plan_offered(incident: Incident, event: PlanOffered) -> Decision:
    """The plan kept on the incident, and its approval told which message holds its
    button when the card is in chat (else the next delivery attaches it)."""
    plan = event.plan
    if event.revert:
        others = tuple(p for p in incident.plans if p.approval_id != plan.approval_id)
        kept = (event.keep,) if event.keep is not None else ()
        new = replace(incident, plans=(*others, *kept), revert_plan=plan, updated=event.at)
    else:
        new = replace(incident, plans=(*incident.plans, plan), updated=event.at)
    chat = new.chat
    attach = (AttachApprovals((plan.approval_id,), chat.channel, chat.ts),) if chat else ()
    return new, attach


def _action_finished(incident: Incident, event: ActionFinished) -> Decision:
    return replace(incident, running=None, updated=event.at), (PostMessage(),)


def _alert_cleared(incident: Incident, event: AlertCleared) -> Decision:
    """Resolved: re-rendered, the closing note. Kept open with its alert cleared (a
    hardware fault): re-rendered, and the thread told the fault is still there."""
    if incident.state is S.RESOLVED or incident.cleared_at is None:
        return incident, (PostMessage(), ClosingNote())
    faults = outlasting(incident)
    if not faults:  # an event kind, or a state that cannot resolve: nothing to say yet
        return incident, ()
    text = strings.FLOW_ALERT_CLEARED_FAULT.format(
        fault="; ".join(f.title for f in faults)[:300])
    return incident, (PostMessage(), ReplyInThread(text))


def _acked(incident: Incident, event: Acked) -> Decision:
    if not incident.is_open:
        return incident, (_cannot(incident, "acknowledged"),)
    told = Told(strings.INCIDENT_ACKED.format(id=incident.id))
    if incident.acked_by:
        return incident, (told,)
    new = replace(incident, acked_by=event.by, updated=event.at)
    return new, (Announce("incident.ack", event.by, event.at), PostMessage(), told)


def _resolve_asked(incident: Incident, event: ResolveAsked) -> Decision:
    """A person's resolve: named in ``resolved_by`` (the transition withdraws the pending
    approvals in the same write, by this user)."""
    if not can_transition(incident.state, S.RESOLVED):
        return incident, (_cannot(incident, "resolved"),)
    named = replace(incident, resolved_by=event.by, snooze=None)
    new, moved = _move(named, S.RESOLVED, event.at, event.by, "resolved by a person")
    return new, (moved, Announce("incident.resolve", event.by, event.at), PostMessage(),
                 Told(strings.INCIDENT_RESOLVED.format(id=incident.id)))


def _snooze_asked(incident: Incident, event: SnoozeAsked) -> Decision:
    if incident.state not in SNOOZABLE or not 0 < event.duration_s <= MAX_SNOOZE_S:
        return incident, (_cannot(incident, "snoozed"),)
    until = event.at + event.duration_s
    snoozed = replace(incident, snooze=Snooze(event.by, until, incident.state.value))
    new, moved = _move(snoozed, S.SNOOZED, event.at, event.by, f"snoozed for {event.duration_s}s")
    detail = {"until": until, "duration_s": event.duration_s}
    return new, (moved, Announce("incident.snoozed", event.by, event.at, detail), PostMessage(),
                 Told(strings.INCIDENT_SNOOZED.format(id=incident.id, until=_utc(until))))


def _snooze_ended(incident: Incident, event: SnoozeEnded) -> Decision:
    """Back to the state it was snoozed from (awaiting approval if that was lost)."""
    if incident.state is not S.SNOOZED or (
            incident.snooze is not None and incident.snooze.until > event.at):
        return incident, ()
    back = S(incident.snooze.from_state if incident.snooze is not None
             else S.AWAITING_APPROVAL.value)
    new, moved = _move(replace(incident, snooze=None), back, event.at, event.by, "snooze ended")
    return new, (moved, PostMessage())


def _escalate_asked(incident: Incident, event: EscalateAsked) -> Decision:
    if not incident.is_open:
        return incident, (_cannot(incident, "escalated"),)
    new = replace(incident, escalated_by=event.by, updated=event.at)
    return new, (Announce("incident.escalate", event.by, event.at),
                 ReplyInThread(strings.VIEW_ESCALATED.format(who=f"<@{event.by}>")), PostMessage(),
                 Told(strings.INCIDENT_ESCALATED.format(id=incident.id)))


def _retry_clicked(incident: Incident, event: RetryClicked) -> Decision:
    """The pending approvals withdrawn and the retry announced now; the diagnosis runs
    off the click (``RetryAsked``). Refused where the incident cannot be retried."""
    if incident.state not in RETRYABLE:
        return incident, (_cannot(incident, "retried"),)
    return incident, (WithdrawPending(event.by, "diagnosing again"),
                      Announce("incident.retry", event.by, event.at), Rediagnose(),
                      Told(strings.INCIDENT_RETRYING.format(id=incident.id)))


def _cannot(incident: Incident, verb: str) -> Refused:
    return Refused(strings.INCIDENT_CANNOT.format(id=incident.id, state=incident.state.value,
                                                  verb=verb))


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))


_HANDLERS: dict[type, Callable[[Incident, Any], Decision]] = {
    AlertOpened: _alert_opened, RetryAsked: _retry_asked, RetryClicked: _retry_clicked,
    DiagnosisFinished: _diagnosis_finished, DiagnosisFailed: _diagnosis_failed,
    ApprovalClicked: _approval_clicked, ApprovalDenied: _approval_denied,
    ApprovalExpired: _approval_expired, ActionStarted: _action_started,
    ActionObserved: _action_observed, RevertObserved: _revert_observed,
    ActionNotNeeded: _action_not_needed, ReprobeFailed: _reprobe_failed,
    ActionFailed: _action_failed, GateObserved: _gate_observed, XidsFolded: _xids_folded,
    ResumeQueued: _resume_queued, CardDelivered: _card_delivered,
    StepAbandoned: _step_abandoned, ActionReadBack: _action_read_back,
    RebootRequested: _reboot_requested, RebootSettled: _reboot_settled,
    HostRebootMarked: _host_reboot_marked, RebootFollowed: _reboot_followed,
    NodeDrained: _node_drained, HostGrouped: _host_grouped, ProgressShown: _progress_shown,
    ExtractionFinished: _extraction_finished, PlanOffered: _plan_offered,
    ActionFinished: _action_finished, AlertCleared: _alert_cleared, Acked: _acked,
    ResolveAsked: _resolve_asked, SnoozeAsked: _snooze_asked, SnoozeEnded: _snooze_ended,
    EscalateAsked: _escalate_asked,
}
EVENTS: tuple[type[FlowEvent], ...] = tuple(_HANDLERS)
