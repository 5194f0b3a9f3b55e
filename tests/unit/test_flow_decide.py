"""``bot.domain.flow.decide`` over every (state × event), without I/O: the state table
guards each change, a change always carries its audit line (``Transitioned``), and each
event does what the flow did before it was a pure function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from bot.core import strings
from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Seen, Verification
from bot.domain.approval import Approval, ApprovalAction
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.domain.flow import (
    ACTABLE,
    EVENTS,
    FOLLOW_UP_FROM,
    RETRYABLE,
    Acked,
    ActionFailed,
    ActionFinished,
    ActionNotNeeded,
    ActionObserved,
    ActionReadBack,
    ActionStarted,
    AlertCleared,
    AlertOpened,
    Announce,
    ApprovalClicked,
    ApprovalDenied,
    ApprovalExpired,
    AttachApprovals,
    Audit,
    CardDelivered,
    ClosingNote,
    DiagnosisFailed,
    DiagnosisFinished,
    EscalateAsked,
    ExtractionFinished,
    FlowEvent,
    GateObserved,
    HostGrouped,
    HostRebootMarked,
    NodeDrained,
    PlanOffered,
    PostMessage,
    ProgressShown,
    RebootFollowed,
    RebootRequested,
    RebootSettled,
    Rediagnose,
    Refused,
    ReplyInThread,
    ReprobeFailed,
    ResolveAsked,
    ResumeQueued,
    RetryAsked,
    RetryClicked,
    RevertObserved,
    RunAction,
    RunDiagnosis,
    SayResult,
    SnoozeAsked,
    SnoozeEnded,
    StepAbandoned,
    StepRedriven,
    SweepNext,
    Then,
    Transitioned,
    WithdrawPending,
    XidsFolded,
    decide,
    outcome_state,
)
from bot.domain.incident import Incident
from bot.domain.incident_record import (
    ActionPlan,
    ChatRefs,
    GateRecord,
    HostRebootMark,
    ProgressTracker,
    RebootPending,
    Running,
    Snooze,
    StepResult,
)
from bot.domain.lifecycle import (
    FIRST_DIAGNOSIS,
    SNOOZABLE,
    TRANSITIONS,
    IllegalTransition,
    IncidentState,
    StepTaken,
    can_transition,
)
from bot.domain.xid_storm import XidTally

S = IncidentState
AT, BOT, USER = 1_700_000_000.0, "incident-bot", "U0ALICE"
ACTION = ProposedAction("a1", "systemd.stop_disable", {"unit": "vllm.service"}, "frees GPUs")
APPROVAL = Approval("ap1", "INC-1", ApprovalAction.of(ACTION, ("systemctl stop vllm.service",)),
                    "hash", BOT, AT - 60, AT + 1800)
FOUND = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.4,
                  (Finding("gpu.idle_vram_held", Severity.CRITICAL, "8 GPUs held"),), (ACTION,))
PLAN = ActionPlan(ACTION, ("systemctl stop vllm.service",), "ap1")
PASSED = GateRecord("repair", "gpu-01", True, (), {"gpu_count": True}, 3,
                    ({"level": "readings", "status": "passed"},))
FAILED = GateRecord("repair", "gpu-01", False, ("dcgmi diag -r 2: memory failed on GPU 3",),
                    {}, 1, ({"level": "readings", "status": "passed"},
                         {"level": "dcgm", "status": "failed"}))


def result(ok: bool) -> ActionResult:
    return ActionResult("systemd.stop_disable", {"unit": "vllm.service"}, "gpu-01",
                        Outcome.SUCCEEDED if ok else Outcome.FAILED, "stopped", USER, "hash",
                        verification=Verification(Seen.of(ok), "8/8 GPUs free"), started_at=AT - 5,
                        duration_s=2.0)


def incident(state: IncidentState, **parts: object) -> Incident:
    base = Incident("INC-1", "gpu-01", "vram_idle", state=state, first_seen=AT - 600,
                    updated=AT - 60, diagnosis=FOUND, plans=(PLAN,))
    return replace(base, **parts)  # type: ignore[arg-type]


EVENT_SAMPLES: dict[type[FlowEvent], FlowEvent] = {
    AlertOpened: AlertOpened(AT, BOT),
    RetryAsked: RetryAsked(AT, BOT),
    RetryClicked: RetryClicked(AT, USER),
    DiagnosisFinished: DiagnosisFinished(AT, BOT, FOUND, (PLAN,), "hash"),
    DiagnosisFailed: DiagnosisFailed(AT, BOT, "abc123"),
    ApprovalClicked: ApprovalClicked(AT, USER, APPROVAL),
    ApprovalDenied: ApprovalDenied(AT, USER, APPROVAL, "not now"),
    ApprovalExpired: ApprovalExpired(AT, BOT, APPROVAL),
    ActionStarted: ActionStarted(AT, USER, "systemd.stop_disable"),
    ActionObserved: ActionObserved(AT, BOT, result(True)),
    RevertObserved: RevertObserved(AT, BOT, result(True)),
    ActionNotNeeded: ActionNotNeeded(AT, USER, "systemd.stop_disable", "8 GPUs free"),
    ReprobeFailed: ReprobeFailed(AT, USER, "systemd.stop_disable", "Connection refused"),
    ActionFailed: ActionFailed(AT, BOT, "nothing ran"),
    ResumeQueued: ResumeQueued(AT, BOT, "ex-0123456789ab"),
    ActionFinished: ActionFinished(AT, BOT),
    AlertCleared: AlertCleared(AT, BOT),
    Acked: Acked(AT, USER),
    ResolveAsked: ResolveAsked(AT, USER),
    SnoozeAsked: SnoozeAsked(AT, USER, 3600),
    SnoozeEnded: SnoozeEnded(AT, BOT),
    EscalateAsked: EscalateAsked(AT, USER),
    GateObserved: GateObserved(AT, BOT, FAILED, "health gate failed", repair=True),
    XidsFolded: XidsFolded(AT, BOT),
    CardDelivered: CardDelivered(AT, BOT, ChatRefs("C1", "1.0", "1.0")),
    StepAbandoned: StepAbandoned(AT, "reconciler", S.DIAGNOSING, 2, "deadline passed 1s ago"),
    ActionReadBack: ActionReadBack(AT, "reconciler", S.REMEDIATING, None, "stopped",
                                   result(True)),
    RebootRequested: RebootRequested(AT, USER, result(True), RebootPending("b0", AT, AT + 900,
                                                                           USER), "rebooting"),
    RebootSettled: RebootSettled(AT, BOT, RebootPending("b0", AT - 60, AT + 840, USER, True,
                                                        "b1"), True, "back, problem gone"),
    HostRebootMarked: HostRebootMarked(AT, BOT, HostRebootMark("INC-0", USER, AT), "rebooted"),
    RebootFollowed: RebootFollowed(AT, BOT, HostRebootMark("INC-0", USER, AT - 60, True, "b1"),
                                   FOUND, "gone after the reboot"),
    NodeDrained: NodeDrained(AT, BOT, "gpu-01", "gpu-01 is DRAINED: nothing runs there"),
    ProgressShown: ProgressShown(AT, BOT, ProgressTracker(((AT, 10),), AT, 10, "C1", "2.0",
                                                          "50%", AT)),
    ExtractionFinished: ExtractionFinished(AT, BOT, True, "ex done: 1,000 items in 10 min"),
    PlanOffered: PlanOffered(AT, BOT, ActionPlan(ACTION, (), "ap9")),
    HostGrouped: HostGrouped(AT, BOT, "INC-2"),
}


def expected_state(state: IncidentState, event: FlowEvent) -> IncidentState | type[Exception]:
    """The rule, stated once more, independently of ``decide``."""
    stays = state
    rules: dict[type[FlowEvent], Callable[[], IncidentState | type[Exception]]] = {
        AlertOpened: lambda: S.DIAGNOSING if state in FIRST_DIAGNOSIS else StepTaken,
        RetryAsked: lambda: S.DIAGNOSING if state is S.DIAGNOSING
        or can_transition(state, S.DIAGNOSING) else IllegalTransition,
        RetryClicked: lambda: stays,
        DiagnosisFinished: lambda: outcome_state(FOUND, 1) if state is S.DIAGNOSING
        else IllegalTransition,
        DiagnosisFailed: lambda: S.DIAGNOSIS_FAILED if can_transition(state, S.DIAGNOSIS_FAILED)
        else stays,
        ApprovalClicked: lambda: S.APPROVED if state is S.AWAITING_APPROVAL else stays,
        ApprovalDenied: lambda: S.DENIED if state is S.AWAITING_APPROVAL else stays,
        ApprovalExpired: lambda: S.EXPIRED if state is S.AWAITING_APPROVAL else stays,
        ActionStarted: lambda: S.REMEDIATING if state is S.APPROVED or state in FOLLOW_UP_FROM
        else stays,
        ActionObserved: lambda: S.VERIFIED if state is S.REMEDIATING else stays,
        RevertObserved: lambda: S.VERIFIED if state is S.REMEDIATING else stays,
        ActionNotNeeded: lambda: S.RESOLVED if state is S.APPROVED else stays,
        # a re-probe that could not read the host is never "no longer holds": Retry
        ReprobeFailed: lambda: S.ACTION_FAILED if state is S.APPROVED else stays,
        ActionFailed: lambda: S.ACTION_FAILED if state in (S.APPROVED, S.REMEDIATING) else stays,
        ResumeQueued: lambda: S.RESUMED if state is S.VERIFIED else stays,
        ActionFinished: lambda: stays,
        AlertCleared: lambda: stays,
        Acked: lambda: stays,
        ResolveAsked: lambda: S.RESOLVED if can_transition(state, S.RESOLVED) else stays,
        SnoozeAsked: lambda: S.SNOOZED if state in SNOOZABLE else stays,
        SnoozeEnded: lambda: S.AWAITING_APPROVAL if state is S.SNOOZED else stays,
        EscalateAsked: lambda: stays,
        GateObserved: lambda: S.ACTION_FAILED if state is S.VERIFIED else stays,
        XidsFolded: lambda: stays,
        CardDelivered: lambda: stays,
        # the sample's third interruption of a diagnosis: given up, with Retry
        StepAbandoned: lambda: S.DIAGNOSIS_FAILED if state is S.DIAGNOSING else stays,
        # the sample's verified read-back of the step it saw (remediating), nothing else
        ActionReadBack: lambda: S.VERIFIED if state is S.REMEDIATING else StepTaken,
        RebootRequested: lambda: stays,
        RebootSettled: lambda: S.VERIFIED if state is S.REMEDIATING else StepTaken,
        HostRebootMarked: lambda: stays,
        RebootFollowed: lambda: S.RESOLVED if can_transition(state, S.RESOLVED) else stays,
        NodeDrained: lambda: stays,
        ProgressShown: lambda: stays,
        ExtractionFinished: lambda: S.RESOLVED if state is S.RESUMED else StepTaken,
        PlanOffered: lambda: stays,
        HostGrouped: lambda: stays,
    }
    return rules[type(event)]()


def test_every_event_type_has_a_sample_and_a_rule() -> None:
    assert set(EVENT_SAMPLES) == set(EVENTS)


@pytest.mark.parametrize("state", sorted(set(IncidentState), key=lambda s: s.value))
@pytest.mark.parametrize("kind", list(EVENT_SAMPLES), ids=lambda k: k.__name__)
def test_every_state_and_event(state: IncidentState, kind: type[FlowEvent]) -> None:
    event = EVENT_SAMPLES[kind]
    before = incident(state)
    want = expected_state(state, event)
    if isinstance(want, type):
        with pytest.raises(want):
            decide(before, event)
        return
    new, effects = decide(before, event)
    assert new.state is want
    assert new.state is state or new.state in TRANSITIONS[state]  # the table guards it
    moves = [e for e in effects if isinstance(e, Transitioned)]
    reentered = new.state is state is S.DIAGNOSING and kind in (AlertOpened, RetryAsked)
    assert len(moves) == (1 if new.state is not state or reentered else 0)
    assert before == incident(state)  # nothing changed in place
    assert decide(before, event) == (new, effects)  # the same input, the same answer


def test_the_first_diagnosis_posts_the_alert_card_then_diagnoses() -> None:
    new, effects = decide(incident(S.OPEN, diagnosis=None, plans=()), AlertOpened(AT, BOT))
    assert new.state is S.DIAGNOSING and new.updated == AT
    assert effects == (Transitioned(BOT, "alert received"), PostMessage(required=False),
                       RunDiagnosis(evidence=True))
    _, again = decide(incident(S.DIAGNOSING), AlertOpened(AT, BOT))  # a re-drive: no card
    assert again == (Transitioned(BOT, "alert received"), RunDiagnosis(evidence=False))


def test_a_finished_diagnosis_is_stored_with_its_plans_and_posted_in_one_decision() -> None:
    before = incident(S.DIAGNOSING, diagnosis=None, plans=(), running=Running("x", "y", 1.0))
    new, effects = decide(before, DiagnosisFinished(AT, BOT, FOUND, (PLAN,), "h1", evidence=True))
    assert (new.state, new.diagnosis, new.plans, new.evidence_hash, new.running) == (
        S.AWAITING_APPROVAL, FOUND, (PLAN,), "h1", None)
    assert effects == (Transitioned(BOT, "1 findings, 1 proposed actions", "h1"),
                       PostMessage(evidence=True))


def test_a_failed_diagnosis_names_its_error_and_keeps_retry() -> None:
    new, effects = decide(incident(S.DIAGNOSING), DiagnosisFailed(AT, BOT, "e42"))
    assert new.state is S.DIAGNOSIS_FAILED and new.plans == ()
    assert new.diagnosis is not None and "e42" in new.diagnosis.findings[0].title
    assert effects[-1] == PostMessage()


def test_a_click_event_delivered_again_after_its_action_finished_runs_nothing() -> None:
    """The consumer died after the click ran but before its ack: the event comes back to
    another replica minutes later, when the incident is verified and acts on follow-ups."""
    accepted, effects = decide(incident(S.AWAITING_APPROVAL), ApprovalClicked(AT, USER, APPROVAL))
    assert accepted.accepted == ("ap1",) and RunAction(APPROVAL, USER) in effects
    finished = replace(accepted, state=S.VERIFIED, running=None)
    with pytest.raises(StepTaken):
        decide(finished, ApprovalClicked(AT + 300, USER, APPROVAL))
    other = replace(APPROVAL, id="ap2")  # a follow-up's own approval still runs
    assert isinstance(decide(finished, ApprovalClicked(AT + 300, USER, other))[1][-1], RunAction)


def test_a_failure_that_arrives_after_the_incident_moved_on_changes_nothing() -> None:
    """A stale failure (another diagnosis won, a person resolved it) must not wipe the
    plans and the running step of a live incident, nor post 'an internal error'."""
    for state in (S.AWAITING_APPROVAL, S.REMEDIATING, S.VERIFIED, S.RESOLVED,
                  S.DIAGNOSIS_FAILED):
        before = incident(state, running=Running("systemd.stop_disable", USER, AT - 5, "ap1"))
        assert decide(before, DiagnosisFailed(AT, BOT, "e42")) == (before, ())


def test_an_approve_click_marks_running_withdraws_the_others_and_hands_the_action_over() -> None:
    new, effects = decide(incident(S.AWAITING_APPROVAL), ApprovalClicked(AT, USER, APPROVAL))
    assert new.state is S.APPROVED
    assert new.running == Running("systemd.stop_disable", USER, AT, "ap1")
    assert [type(e) for e in effects] == [Transitioned, WithdrawPending, PostMessage, RunAction]
    assert effects[1] == WithdrawPending(USER, strings.WITHDRAWN_REASON, keep="ap1")
    busy = incident(S.VERIFIED, running=Running("x", USER, AT - 1, "other"))
    same, said = decide(busy, ApprovalClicked(AT, USER, APPROVAL))
    assert same == busy and isinstance(said[-1], Refused) and "is verified" in said[-1].text


def test_a_click_event_delivered_again_while_its_action_runs_is_a_duplicate() -> None:
    """The consumer died between handling ``click.approved`` and its ack: the entry comes
    again; its action is running, so it is a duplicate (nothing written, nothing said), not
    "the incident moved on"."""
    running = incident(S.APPROVED, running=Running("systemd.stop_disable", USER, AT, "ap1"))
    with pytest.raises(StepTaken):
        decide(running, ApprovalClicked(AT + 1, USER, APPROVAL))


def test_a_follow_up_click_acts_from_where_the_last_action_left_it() -> None:
    for state in ACTABLE - {S.AWAITING_APPROVAL}:
        new, effects = decide(incident(state), ApprovalClicked(AT, USER, APPROVAL))
        assert new.state is state and new.running is not None
        assert not any(isinstance(e, Transitioned) for e in effects)


def test_what_verify_observed_decides_verified_or_failed_and_is_said_in_the_thread() -> None:
    ok, effects = decide(incident(S.REMEDIATING), ActionObserved(AT, BOT, result(True)))
    assert ok.state is S.VERIFIED and ok.last_outcome is not None and ok.results[-1].ok
    assert effects == (Transitioned(BOT, "stopped"), SayResult(result(True)))
    bad, _ = decide(incident(S.REMEDIATING), ActionObserved(AT, BOT, result(False)))
    assert bad.state is S.ACTION_FAILED and not bad.results[-1].ok
    undone, _ = decide(incident(S.REMEDIATING), RevertObserved(AT, BOT, result(True)))
    assert undone.state is S.VERIFIED  # the revert verified; its word is "Reverted"


REVERT = ProposedAction("r1", "systemd.revert", {"unit": "vllm.service"}, "undo")
DROPIN = ProposedAction("d1", "systemd.dropin", {"unit": "vllm.service"}, "lasting")
RESUME = ProposedAction("x1", "extraction.resume", {"job": "ex-0123456789ab"}, "resume")


def after_the_stop(**parts: object) -> Incident:
    """The stop (ap1) verified; its Revert, drop-in and resume offered after it; the
    Revert clicked and running."""
    plans = (PLAN, ActionPlan(DROPIN, (), "ap-dropin", follows="ap1"),
             ActionPlan(RESUME, (), "ap-resume", follows="ap1"))
    return incident(S.REMEDIATING, plans=plans,
                    revert_plan=ActionPlan(REVERT, (), "ap-revert", follows="ap1"),
                    running=Running("systemd.revert", USER, AT, "ap-revert"), **parts)


def test_a_revert_marks_the_step_it_undid_and_withdraws_that_steps_follow_ups() -> None:
    new, effects = decide(after_the_stop(), RevertObserved(AT, BOT, result(True)))
    assert new.state is S.VERIFIED
    assert [p.undone for p in new.plans] == [True, False, False]  # the stop no longer counts
    (withdraw,) = [e for e in effects if isinstance(e, WithdrawPending)]
    assert withdraw.only == ("ap-dropin", "ap-resume")  # never the revert itself
    assert withdraw.reason == strings.FLOW_REVERT_WITHDREW


def test_a_revert_that_did_not_take_leaves_the_step_counted_but_withdraws_what_followed() -> None:
    failed = replace(result(False), commands=(CommandRecord("start", "systemctl start x", 1),))
    new, effects = decide(after_the_stop(), RevertObserved(AT, BOT, failed))
    assert new.state is S.ACTION_FAILED and not any(p.undone for p in new.plans)
    assert any(isinstance(e, WithdrawPending) for e in effects)
    refused = replace(result(False), outcome=Outcome.REFUSED, verification=None)
    _, nothing_ran = decide(after_the_stop(), RevertObserved(AT, BOT, refused))
    assert not any(isinstance(e, WithdrawPending) for e in nothing_ran)


def test_a_reprobe_that_could_not_read_the_host_is_could_not_check_with_retry() -> None:
    new, effects = decide(incident(S.APPROVED), ReprobeFailed(
        AT, USER, "systemd.stop_disable", "127.0.0.1:22: Connection refused",
        "stop vllm.service and keep it from starting at boot"))
    assert new.state is S.ACTION_FAILED and new.state in RETRYABLE
    assert new.last_outcome is not None and new.last_outcome.result is None
    assert new.last_outcome.could_not_check == "127.0.0.1:22: Connection refused"
    (said,) = [e for e in effects if isinstance(e, ReplyInThread)]
    assert "Connection refused" in said.text and "nothing ran" in said.text
    assert "stop vllm.service" in said.text and "systemd.stop_disable" not in said.text
    assert not any(e for e in effects if isinstance(e, Transitioned) and "no longer" in e.reason)


def test_words_a_person_reads_name_the_action_never_its_kind() -> None:
    said = "stop vllm.service and keep it from starting at boot"
    _, denied = decide(incident(S.AWAITING_APPROVAL),
                       ApprovalDenied(AT, USER, APPROVAL, "not now", said))
    text = next(e.text for e in denied if isinstance(e, ReplyInThread))
    assert said in text and "systemd." not in text
    new, _ = decide(incident(S.AWAITING_APPROVAL), ApprovalClicked(AT, USER, APPROVAL, said))
    assert new.running is not None and new.running.said == said


def test_a_resumed_extraction_links_the_job_and_moves_verified_to_resumed() -> None:
    new, effects = decide(incident(S.VERIFIED), ResumeQueued(AT, BOT, "ex-0123456789ab"))
    assert (new.state, new.job_id) == (S.RESUMED, "ex-0123456789ab")
    assert effects == (Transitioned(BOT, "extraction ex-0123456789ab resumed"),)


def test_the_action_step_ending_clears_its_mark_and_rerenders() -> None:
    new, effects = decide(incident(S.VERIFIED, running=Running("k", USER, AT, "ap1")),
                          ActionFinished(AT, BOT))
    assert new.running is None and effects == (PostMessage(),)


def test_a_cleared_alert_rerenders_and_posts_the_closing_note() -> None:
    same, effects = decide(incident(S.RESOLVED), AlertCleared(AT, BOT))
    assert same == incident(S.RESOLVED) and effects == (PostMessage(), ClosingNote())


ECC = Diagnosis("gpu-01", "gpu_health", DiagnosisStatus.OK, 0.4, (Finding(
    "gpu.broken", Severity.CRITICAL, "GPU 5 (AB:00.0) is broken: Xid 48 since boot"),))


def test_a_hardware_fault_kept_open_after_its_alert_says_the_fault_is_still_there() -> None:
    kept = incident(S.NO_ACTION, diagnosis=ECC, plans=(), cleared_at=AT - 1)
    same, effects = decide(kept, AlertCleared(AT, BOT))
    assert same == kept and same.state is S.NO_ACTION  # not resolved
    assert not any(isinstance(e, ClosingNote) for e in effects)
    (said,) = [e for e in effects if isinstance(e, ReplyInThread)]
    assert "Xid 48" in said.text and "still there" in said.text
    # a kept-open incident with no hardware finding (an event kind): nothing to say
    assert decide(incident(S.NO_ACTION, cleared_at=AT - 1), AlertCleared(AT, BOT))[1] == ()


def test_a_persons_decisions_are_announced_and_refused_where_they_do_not_apply() -> None:
    acked, effects = decide(incident(S.AWAITING_APPROVAL), Acked(AT, USER))
    assert acked.acked_by == USER and Announce("incident.ack", USER, AT) in effects
    _, again = decide(acked, Acked(AT, USER))
    assert not any(isinstance(e, Announce) for e in again)  # acked once
    resolved, effects = decide(incident(S.NO_ACTION), ResolveAsked(AT, USER))
    assert (resolved.state, resolved.resolved_by) == (S.RESOLVED, USER)
    snoozed, _ = decide(incident(S.ACTION_FAILED), SnoozeAsked(AT, USER, 600))
    assert snoozed.snooze == Snooze(USER, AT + 600, "action_failed")
    woke, _ = decide(snoozed, SnoozeEnded(AT + 601, BOT))
    assert woke.state is S.ACTION_FAILED and woke.snooze is None
    still, _ = decide(snoozed, SnoozeEnded(AT + 10, BOT))
    assert still == snoozed
    _, too_long = decide(incident(S.NO_ACTION), SnoozeAsked(AT, USER, 8 * 86400))
    assert isinstance(too_long[0], Refused)
    for state in RETRYABLE:
        same, retry = decide(incident(state), RetryClicked(AT, USER))
        assert same.state is state and Rediagnose() in retry
        assert any(isinstance(e, WithdrawPending) for e in retry)
    _, no = decide(incident(S.VERIFIED), RetryClicked(AT, USER))
    assert [type(e) for e in no] == [Refused]


def test_a_passed_gate_is_stored_audited_and_said_and_a_repair_is_rerendered() -> None:
    new, effects = decide(incident(S.VERIFIED), GateObserved(AT, BOT, PASSED, "gate passed"))
    assert (new.state, new.gate) == (S.VERIFIED, PASSED)
    assert effects == (Audit(BOT, "gate.passed", PASSED.to_json()), ReplyInThread("gate passed"))
    _, repaired = decide(incident(S.VERIFIED),
                         GateObserved(AT, BOT, PASSED, "gate passed", repair=True))
    assert repaired[-1] == PostMessage() and not any(isinstance(e, Transitioned)
                                                     for e in repaired)


def test_a_repair_the_gate_keeps_out_is_not_fixed() -> None:
    """verified -> action_failed with the gate's reasons as the outcome, said once."""
    new, effects = decide(incident(S.VERIFIED),
                          GateObserved(AT, BOT, FAILED, "health gate failed", repair=True))
    why = ("gpu-01 is not back in service: the repair verified, but the health gate stopped "
           "at level 1: dcgmi diag -r 2: memory failed on GPU 3")
    assert new.state is S.ACTION_FAILED and new.last_outcome is not None
    assert new.last_outcome.summary == why and new.gate == FAILED
    assert effects[0] == Transitioned(BOT, why[:200])
    assert Audit(BOT, "gate.failed", FAILED.to_json()) in effects
    assert Audit(BOT, "repair.kept_out", {"reasons": list(FAILED.reasons), "reached": 1,
                                          "rma": False}) in effects
    assert [e.text for e in effects if isinstance(e, ReplyInThread)] == [
        "health gate failed", why]
    # a drained node: the caller words the failure (stays drained); still not fixed
    quiet, said = decide(incident(S.VERIFIED), GateObserved(
        AT, BOT, FAILED, "health gate failed", say=False, repair=True))
    assert quiet.state is S.ACTION_FAILED
    assert not any(isinstance(e, ReplyInThread) for e in said)
    # a resume's gate that failed changes no state: the resume is blocked by its caller
    blocked, said = decide(incident(S.VERIFIED), GateObserved(AT, BOT, FAILED, "failed"))
    assert blocked.state is S.VERIFIED and blocked.last_outcome is None
    assert said == (Audit(BOT, "gate.failed", FAILED.to_json()), ReplyInThread("failed"))


def test_a_node_on_the_rma_list_is_kept_out_whatever_the_levels_said() -> None:
    rma = "gpu-01 is not back in service: it is on the RMA list (gpu.broken:5d came back)"
    kept = replace(PASSED, passed=False, reasons=(rma,))
    new, effects = decide(incident(S.VERIFIED),
                          GateObserved(AT, BOT, kept, "failed", repair=True, rma=rma))
    assert new.state is S.ACTION_FAILED and new.last_outcome is not None
    assert new.last_outcome.summary == rma
    assert any(isinstance(e, Audit) and e.action == "repair.kept_out" and e.detail["rma"]
               for e in effects)


def test_a_repair_clears_the_incidents_xids_whatever_the_gate_says() -> None:
    xid = XidTally(79, 3, AT - 300, AT - 200, ("3",))
    for record in (PASSED, FAILED):
        new, _ = decide(incident(S.VERIFIED, xids=(xid,)), GateObserved(
            AT, BOT, record, "", repair=True, cleared_by="the reset of GPU 3"))
        assert (new.xids[0].cleared_at, new.xids[0].cleared_by) == (AT, "the reset of GPU 3")


def test_a_folded_xid_storm_edits_the_posted_message_only() -> None:
    xid = XidTally(45, 224, AT - 600, AT, ("0",), app=True)
    posted = ChatRefs("C1", "1.0", "1.0")
    same, effects = decide(incident(S.AWAITING_APPROVAL, xids=(xid,), chat=posted),
                           XidsFolded(AT, BOT))
    assert same.state is S.AWAITING_APPROVAL and effects == (PostMessage(),)
    assert decide(incident(S.DIAGNOSING, xids=(xid,)), XidsFolded(AT, BOT))[1] == ()
    assert decide(incident(S.AWAITING_APPROVAL, chat=posted), XidsFolded(AT, BOT))[1] == ()


POSTED = ChatRefs("C1", "1.0", "1.0")


@pytest.mark.parametrize("state", sorted(set(IncidentState), key=lambda s: s.value))
def test_a_delivered_card_is_kept_and_its_approvals_attached_in_every_state(
        state: IncidentState) -> None:
    before = incident(state, chat=None)
    new, effects = decide(before, CardDelivered(AT, BOT, POSTED))
    assert new == replace(before, chat=POSTED, updated=AT)  # only where the card is
    assert effects == (AttachApprovals(("ap1",), "C1", "1.0"),)  # no transition, no post


def test_an_edit_of_the_known_card_changes_nothing_but_still_attaches() -> None:
    before = incident(S.VERIFIED, chat=POSTED, plans=(PLAN, replace(PLAN, approval_id="ap2")))
    new, effects = decide(before, CardDelivered(AT, BOT, POSTED))
    assert new is before, "the same record: the runner writes nothing"
    # a follow-up offered after the first delivery learns its message from the next edit
    assert effects == (AttachApprovals(("ap1", "ap2"), "C1", "1.0"),)


def test_a_card_moved_elsewhere_is_kept_where_it_is_now() -> None:
    """A card placed in a storm's thread, or delivered again after a lost ack: its new
    message and thread replace the old ones."""
    moved = ChatRefs("C2", "2.0", "1.5")
    new, effects = decide(incident(S.AWAITING_APPROVAL, chat=POSTED),
                          CardDelivered(AT, BOT, moved))
    assert new.chat == moved and new.updated == AT
    assert effects == (AttachApprovals(("ap1",), "C2", "2.0"),)


def test_a_card_without_plans_attaches_nothing() -> None:
    new, effects = decide(incident(S.DIAGNOSING, chat=None, plans=()),
                          CardDelivered(AT, BOT, POSTED))
    assert new.chat == POSTED and effects == ()
    same, none = decide(new, CardDelivered(AT + 5, BOT, POSTED))
    assert same is new and none == ()


def test_the_delivered_reference_replaces_the_stored_one_whole() -> None:
    """Equality is the whole reference: the outbox reports no permalink, so a stored one
    is replaced by the delivery's (as ``remember_card`` did before it was an event)."""
    linked = replace(POSTED, permalink="https://slack.example/archives/C1/p10")
    new, _ = decide(incident(S.RESOLVED, chat=linked), CardDelivered(AT, BOT, POSTED))
    assert new.chat == POSTED


# --- the reconciler's decisions (StepAbandoned) -------------------------------------------

REC, WHY = "reconciler", "owner host:1:2 is gone"


def abandoned(state: IncidentState, attempts: int = 0, max_attempts: int = 3) -> StepAbandoned:
    return StepAbandoned(AT, REC, state, attempts, WHY, max_attempts=max_attempts, hold_s=90.0)


@pytest.mark.parametrize("state", [S.OPEN, S.DIAGNOSING])
def test_an_abandoned_diagnosis_is_released_and_diagnosed_again(state: IncidentState) -> None:
    before = incident(state)
    for attempts in (0, 1):
        new, effects = decide(before, abandoned(state, attempts))
        assert new is before, "the record is unchanged: only its step is re-driven"
        assert effects == (StepRedriven(REC, WHY), SweepNext(Then.REDIAGNOSE, WHY))


@pytest.mark.parametrize(("attempts", "max_attempts"), [(2, 3), (5, 3), (0, 1)])
def test_a_diagnosis_interrupted_too_often_is_given_up_with_retry(attempts: int,
                                                                  max_attempts: int) -> None:
    new, effects = decide(incident(S.DIAGNOSING), abandoned(S.DIAGNOSING, attempts, max_attempts))
    text = strings.FLOW_DIAGNOSIS_INTERRUPTED.format(n=attempts + 1)
    assert new.state is S.DIAGNOSIS_FAILED and new.updated == AT
    assert new.last_outcome is not None and new.last_outcome.summary == text
    assert effects == (Transitioned(REC, text), PostMessage(), SweepNext(Then.GAVE_UP, text))


def test_an_open_incident_nobody_picked_up_too_often_is_given_up_too() -> None:
    """As ``give_up`` did: open -> diagnosis_failed is in the table, with Retry."""
    new, effects = decide(incident(S.OPEN), abandoned(S.OPEN, 2))
    assert new.state is S.DIAGNOSIS_FAILED and can_transition(S.OPEN, S.DIAGNOSIS_FAILED)
    assert isinstance(effects[-1], SweepNext) and effects[-1].then is Then.GAVE_UP


@pytest.mark.parametrize("state", [S.APPROVED, S.REMEDIATING])
@pytest.mark.parametrize("attempts", [0, 7])
def test_an_abandoned_action_is_taken_over_and_read_back_never_run_again(
        state: IncidentState, attempts: int) -> None:
    before = incident(state, running=Running("systemd.stop_disable", USER, AT - 100, "ap1"))
    new, effects = decide(before, abandoned(state, attempts))
    assert new is before  # the read-back decides the outcome, from the host
    assert effects == (StepRedriven(REC, WHY, hold_s=90.0), SweepNext(Then.READ_BACK, WHY))
    assert not any(isinstance(e, RunAction | Transitioned) for e in effects)


@pytest.mark.parametrize("seen", [S.OPEN, S.DIAGNOSING, S.APPROVED, S.REMEDIATING])
@pytest.mark.parametrize("state", sorted(set(IncidentState), key=lambda s: s.value))
def test_an_entry_that_outlived_its_state_is_only_dropped(seen: IncidentState,
                                                          state: IncidentState) -> None:
    if state is seen:
        return
    before = incident(state)
    assert decide(before, abandoned(seen, 9)) == (before, (SweepNext(Then.DROP, WHY),))


# --- an interrupted action read back from the host (ActionReadBack) ---------------------------

MARK = Running("systemd.stop_disable", USER, AT - 1000, "ap1")
NOT_THERE = "vllm.service is still active: not done, Retry"


def read_back(seen: IncidentState, ok: bool, *, running: Running | None = MARK,
              settles: bool = True) -> ActionReadBack:
    found = result(True) if ok else None
    return ActionReadBack(AT, REC, seen, running, found.summary if found else NOT_THERE, found,
                          settles=settles)


def test_a_read_back_that_holds_verifies_with_its_line_and_clears_the_marker() -> None:
    new, effects = decide(incident(S.REMEDIATING, running=MARK), read_back(S.REMEDIATING, True))
    assert new.state is S.VERIFIED and new.running is None and new.updated == AT
    assert [r.ok for r in new.results] == [True] and new.results[0].text == "stopped"
    assert new.last_outcome is not None and new.last_outcome.summary == "stopped"
    assert effects == (Transitioned(REC, "stopped"),)  # the caller re-renders, after its offers


def test_a_read_back_from_approved_goes_through_remediating_first() -> None:
    """The table has no approved -> verified: the first event enters remediating (no line
    yet), the same event again from there verifies with the line."""
    first, effects = decide(incident(S.APPROVED, running=MARK), read_back(S.APPROVED, True))
    assert first.state is S.REMEDIATING and first.results == () and first.running == MARK
    assert effects == (Transitioned(REC, "read back after an interruption"),)
    new, _ = decide(first, read_back(S.REMEDIATING, True))
    assert new.state is S.VERIFIED and new.running is None and len(new.results) == 1


@pytest.mark.parametrize("state", [S.APPROVED, S.REMEDIATING])
def test_a_read_back_that_does_not_hold_fails_with_retry_and_its_words(
        state: IncidentState) -> None:
    new, effects = decide(incident(state, running=MARK), read_back(state, False))
    assert new.state is S.ACTION_FAILED and new.running is None
    assert [(r.ok, r.text) for r in new.results] == [(False, NOT_THERE)]
    assert new.last_outcome is not None and new.last_outcome.summary == NOT_THERE
    assert effects == (Transitioned(REC, NOT_THERE[:200]),)


def test_an_action_that_never_started_fails_without_a_marker() -> None:
    new, _ = decide(incident(S.APPROVED), read_back(S.APPROVED, False, running=None))
    assert new.state is S.ACTION_FAILED and [r.ok for r in new.results] == [False]


@pytest.mark.parametrize("ok", [True, False])
def test_a_read_back_moves_but_writes_no_line_when_the_marker_changed(ok: bool) -> None:
    other = replace(MARK, approval_id="ap2")
    new, effects = decide(incident(S.REMEDIATING, running=other), read_back(S.REMEDIATING, ok))
    assert new.state is (S.VERIFIED if ok else S.ACTION_FAILED)
    assert new.results == () and new.running == other and len(effects) == 1


@pytest.mark.parametrize("seen", [S.APPROVED, S.REMEDIATING])
@pytest.mark.parametrize("state", list(IncidentState))
def test_a_settle_of_a_step_that_moved_writes_nothing(seen: IncidentState,
                                                      state: IncidentState) -> None:
    if state is seen:
        return
    with pytest.raises(StepTaken):
        decide(incident(state, running=MARK), read_back(seen, True))


@pytest.mark.parametrize("ok", [True, False])
@pytest.mark.parametrize("state", [S.VERIFIED, S.ACTION_FAILED, S.RESUMED, S.AWAITING_APPROVAL])
def test_a_stale_marker_gets_its_line_only_and_a_rerender(ok: bool, state: IncidentState) -> None:
    new, effects = decide(incident(state, running=MARK),
                          read_back(state, ok, settles=False))
    assert new.state is state and new.running is None and len(new.results) == 1
    assert new.results[0].ok is ok and effects == (PostMessage(),)


def test_a_stale_marker_settled_by_someone_else_writes_nothing() -> None:
    for running in (None, replace(MARK, at=AT)):
        with pytest.raises(StepTaken):
            decide(incident(S.VERIFIED, running=running),
                   read_back(S.VERIFIED, True, settles=False))


# --- a reboot: sent, settled, the host's other incidents marked and followed -----------------

PENDING = RebootPending("b0", AT - 60, AT + 840, USER)


def test_a_sent_reboot_is_pending_with_its_line_audited_and_said() -> None:
    sent = result(True)
    new, effects = decide(incident(S.REMEDIATING), RebootRequested(AT, USER, sent, PENDING,
                                                                   "rebooting gpu-01"))
    assert new.state is S.REMEDIATING and new.reboot == PENDING and new.updated == AT
    assert [(r.ok, r.text) for r in new.results] == [(True, "rebooting gpu-01")]
    assert new.last_outcome is not None and new.last_outcome.summary == sent.summary
    assert effects == (Audit(USER, "host.reboot_requested", {"host": "gpu-01", "boot_id": "b0"}),
                       ReplyInThread("rebooting gpu-01"))


@pytest.mark.parametrize(("ok", "goal"), [(True, S.VERIFIED), (False, S.ACTION_FAILED)])
def test_a_settled_reboot_moves_with_its_line_audited_said_and_rerendered(
        ok: bool, goal: IncidentState) -> None:
    done = replace(PENDING, done=True, boot_id_after="b1" if ok else None)
    new, effects = decide(incident(S.REMEDIATING, reboot=PENDING),
                          RebootSettled(AT, BOT, done, ok, "the words"))
    assert new.state is goal and new.reboot == done
    assert [(r.ok, r.text) for r in new.results] == [(ok, "the words")]
    detail = {"boot_id_after": done.boot_id_after, "ok": ok, "text": "the words"}
    assert effects == (Transitioned(BOT, "the words"), Audit(BOT, "host.reboot_settled", detail),
                       ReplyInThread("the words"), PostMessage())


def test_a_reboot_settled_elsewhere_writes_nothing() -> None:
    for state in (S.VERIFIED, S.ACTION_FAILED, S.APPROVED):
        with pytest.raises(StepTaken):
            decide(incident(state, reboot=PENDING),
                   RebootSettled(AT, BOT, replace(PENDING, done=True), True, "back"))


def test_another_incident_of_the_host_is_marked_told_and_rerendered() -> None:
    mark = HostRebootMark("INC-0", USER, AT)
    new, effects = decide(incident(S.AWAITING_APPROVAL), HostRebootMarked(AT, BOT, mark, "note"))
    assert new.host_reboot == mark and new.state is S.AWAITING_APPROVAL
    assert effects == (ReplyInThread("note"), PostMessage())


def test_a_followed_incident_whose_problems_are_gone_resolves_with_the_fresh_diagnosis() -> None:
    mark = HostRebootMark("INC-0", USER, AT - 60, True, "b1")
    fresh = replace(FOUND, findings=(), actions=())
    new, effects = decide(incident(S.AWAITING_APPROVAL),
                          RebootFollowed(AT, BOT, mark, fresh, "gone after the reboot"))
    assert new.state is S.RESOLVED and new.host_reboot == mark and new.diagnosis == fresh
    assert [(r.ok, r.text) for r in new.results] == [(True, "gone after the reboot")]
    assert effects == (Transitioned(BOT, "gone after the reboot"),
                       ReplyInThread("gone after the reboot"), PostMessage())


def test_a_followed_incident_only_settles_its_mark_otherwise() -> None:
    mark = HostRebootMark("INC-0", USER, AT - 60, True, "b1")
    new, effects = decide(incident(S.AWAITING_APPROVAL), RebootFollowed(AT, BOT, mark))
    assert new.host_reboot == mark and new.state is S.AWAITING_APPROVAL and effects == ()
    # gone, but the incident resolved meanwhile: the mark only, nothing said
    new, effects = decide(incident(S.RESOLVED), RebootFollowed(AT, BOT, mark, FOUND, "gone"))
    assert new.host_reboot == mark and new.results == () and effects == ()


# --- a drained Slurm node with nothing running any more (NodeDrained) ------------------------

@pytest.mark.parametrize("state", [S.VERIFIED, S.RESUMED, S.ACTION_FAILED])
def test_a_drained_node_is_a_line_on_the_message_and_in_the_thread(state: IncidentState) -> None:
    text = "gpu-01 is DRAINED: nothing runs there"
    before = incident(state, results=(StepResult(True, "drained gpu-01"),))
    new, effects = decide(before, NodeDrained(AT, BOT, "gpu-01", text))
    assert new.state is state and new.updated == AT
    assert [r.text for r in new.results] == ["drained gpu-01", text]
    assert effects == (ReplyInThread(text),)  # the caller offers the repair, then re-renders


# --- a resumed extraction: its progress shown, its job ended ----------------------------------

def test_the_progress_shown_is_kept_on_the_incident_and_nothing_else_happens() -> None:
    tracker = ProgressTracker(((AT - 2, 100), (AT, 140)), AT - 2, 100, "C1", "2.0", "14%", AT)
    new, effects = decide(incident(S.RESUMED), ProgressShown(AT, BOT, tracker))
    assert new.progress == tracker and new.state is S.RESUMED and new.updated == AT
    assert effects == ()  # the step posted or edited the message itself


@pytest.mark.parametrize(("completed", "goal"), [(True, S.RESOLVED), (False, S.ACTION_FAILED)])
def test_the_jobs_end_ends_the_resumed_incident(completed: bool, goal: IncidentState) -> None:
    new, effects = decide(incident(S.RESUMED), ExtractionFinished(AT, BOT, completed, "summary"))
    assert new.state is goal and effects == (Transitioned(BOT, "summary"),)


@pytest.mark.parametrize("state", [S.RESOLVED, S.REMEDIATING, S.VERIFIED])
def test_a_jobs_end_after_the_incident_moved_on_writes_nothing(state: IncidentState) -> None:
    with pytest.raises(StepTaken):
        decide(incident(state), ExtractionFinished(AT, BOT, True, "summary"))


# --- a follow-up offered on the message (PlanOffered) ----------------------------------------

OFFER = ActionPlan(ProposedAction("f1", "systemd.restart", {"unit": "vllm.service"}, "again"),
                   ("systemctl restart vllm.service",), "ap2")
UNDO = ActionPlan(ProposedAction("r1", "systemd.revert", {"unit": "vllm.service"}, "undo"),
                  ("systemctl enable --now vllm.service",), "ap3")


def test_an_offer_joins_the_plans_and_its_approval_learns_the_message() -> None:
    new, effects = decide(incident(S.VERIFIED, chat=POSTED), PlanOffered(AT, BOT, OFFER))
    assert new.plans == (PLAN, OFFER) and new.state is S.VERIFIED and new.updated == AT
    assert effects == (AttachApprovals(("ap2",), "C1", "1.0"),)


def test_an_offer_before_the_card_is_in_chat_attaches_at_the_next_delivery() -> None:
    new, effects = decide(incident(S.VERIFIED, chat=None), PlanOffered(AT, BOT, OFFER))
    assert new.plans == (PLAN, OFFER) and effects == ()
    _, attach = decide(new, CardDelivered(AT, BOT, POSTED))
    assert attach == (AttachApprovals(("ap1", "ap2"), "C1", "1.0"),)


def test_a_revert_is_shown_apart_and_an_earlier_one_still_pending_goes_among_the_plans() -> None:
    new, effects = decide(incident(S.VERIFIED, chat=POSTED),
                          PlanOffered(AT, BOT, OFFER, revert=True))
    assert new.revert_plan == OFFER and new.plans == (PLAN,)
    assert effects == (AttachApprovals(("ap2",), "C1", "1.0"),)
    again, _ = decide(new, PlanOffered(AT, BOT, UNDO, revert=True, keep=OFFER))
    assert again.revert_plan == UNDO and again.plans == (PLAN, OFFER)


@pytest.mark.parametrize("state", list(IncidentState))
def test_a_host_joining_the_group_rerenders_the_parent_and_changes_nothing(
        state: IncidentState) -> None:
    before = incident(state)
    new, effects = decide(before, HostGrouped(AT, BOT, "INC-2"))
    assert new is before and effects == (PostMessage(),)


def test_a_denial_delivered_twice_says_denied_once() -> None:
    """A ``click.denied`` whose consumer died before its ack is delivered again: the thread
    line names the approval as its purpose, so the second one edits the first."""
    first = decide(incident(S.AWAITING_APPROVAL), ApprovalDenied(AT, USER, APPROVAL, "not now"))
    again = decide(first[0], ApprovalDenied(AT, USER, APPROVAL, "not now"))
    said = [next(e for e in effects if isinstance(e, ReplyInThread))
            for _, effects in (first, again)]
    assert said[0].purpose == said[1].purpose == f"denied:{APPROVAL.id}"
    assert first[0].state is S.DENIED and again[0].state is S.DENIED
