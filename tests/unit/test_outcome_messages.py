"""Issue 29, deliverable 5 (pure): the message after an action leads with what was done and
what is true now; offers nobody can take leave it; every catalog kind is a sentence;
Revert is plain and asks first; the SIGTERM→SIGKILL rungs are named; no Escalate when it
has nowhere to go."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import pytest

from bot.chat import blockkit as bk
from bot.chat.base import ButtonStyle
from bot.chat.incident_view import incident_buttons
from bot.chat.render import render_incident, shown_plans
from bot.chat.summary import action_phrase, outcome_lead
from bot.chat.text import in_gib
from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Seen, Verification
from bot.domain.approval import Approval, ApprovalAction, ApprovalStatus
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.domain.incident_record import ActionPlan, LastOutcome, StepResult
from bot.remediation.catalog import CATALOG
from bot.remediation.outcome import summarize

UNIT = "vllm-kimi-k25-int4.service"
DONE_AT = 1_764_586_920.0  # 11:02 UTC
STOP = ProposedAction("a1", "systemd.stop_disable", {"unit": UNIT}, "frees the GPUs", "down")
DROPIN = ProposedAction("a2", "systemd.dropin", {"unit": UNIT, "timeout_stop_s": "30",
                                                 "marker": "/run/incident-bot/gpu-reservation"},
                        "lasting fix", "changes restarts")
REVERT = ProposedAction("r1", "systemd.revert", {"unit": UNIT, "unit_file_state": "enabled",
                                                 "active_state": "active"}, "undo", "restarts")
FINDING = Finding("gpu.idle_vram_held", Severity.CRITICAL,
                  f"{UNIT}, auto-started at boot, holds 8 GPUs × 75.8 GiB at 0%",
                  evidence={"holders": [{"pid": 38514, "unit": UNIT}]})
ECC = Finding("gpu.broken", Severity.CRITICAL, "GPU 5 (AB:00.0): uncorrectable ECC error",
              evidence={"gpu": {"index": 5, "reasons": ["uncorrectable ECC error"]}})
DIAG = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.4, (FINDING,), (STOP,))
SAMPLE = {"unit": UNIT, "pid": "38514", "node": "gpu-01", "job": "4242", "override": "no",
          "unit_file_state": "enabled", "active_state": "active", "gpu": "3",
          "timeout_stop_s": "30", "marker": "/run/incident-bot/gpu-reservation", "size": "500M",
          "paths": "/data/a.pt|/data/b.pt", "need_bytes": "0", "reason": "GPU 3 fell off the bus",
          "incident": "INC-7", "mount": "/data", "full_pct": "90",
          "release": "container:dcgm-exporter|unit:nvidia-persistenced.service"}


@dataclass(frozen=True)
class Stored:
    """What the renderer reads from a stored incident."""

    state: str
    last_outcome: LastOutcome | None = None
    id: str = "INC-1"
    host: str = "gpu-01"
    kind: str = "vram_idle"
    severity: str = "critical"
    first_seen: float = DONE_AT - 600


def stopped(kind: str = "systemd.stop_disable", params: dict[str, str] | None = None,
            detail: str = "8/8 GPUs free (max 0 MiB)", ok: bool = True) -> LastOutcome:
    result = ActionResult(kind, params or {"unit": UNIT}, "gpu-01",
                          Outcome.SUCCEEDED if ok else Outcome.FAILED,
                          f"stopped and disabled {UNIT}; {detail} after 1.2 s", "U1", None,
                          verification=Verification(Seen.of(ok), detail), started_at=DONE_AT - 1.2,
                          duration_s=1.2)
    return LastOutcome.of(result)


def approval(plan_id: str, status: ApprovalStatus) -> Approval:
    return Approval(plan_id, "INC-1", ApprovalAction("x"), "h", "U", DONE_AT - 60, DONE_AT + 1800,
                    status=status, approvers=("U1",) if status is ApprovalStatus.APPROVED else ())


def test_verified_leads_with_what_was_done_and_what_is_true_now() -> None:
    lead = outcome_lead("verified", stopped())
    assert lead == f"Fixed: {UNIT} stopped and disabled; 8/8 GPUs free since 11:02 UTC"
    for state in ("resumed", "resolved"):
        assert outcome_lead(state, stopped()) == lead
    assert outcome_lead("awaiting_approval", stopped()) == ""
    # a failure never says Fixed: it says what verify saw, as Not fixed
    failed = outcome_lead("action_failed", stopped(ok=False, detail="0/8 GPUs free"))
    assert failed.startswith(f"Not fixed: stopped and disabled {UNIT}; 0/8 GPUs free"), failed
    assert outcome_lead("verified", None) == ""


def test_a_host_that_could_not_be_read_is_could_not_check_never_fixed() -> None:
    lost = stopped().result
    assert lost is not None
    unread = replace(lost, outcome=Outcome.COULD_NOT_CHECK,
                     summary="stopped and disabled x was sent, but gpu-01 could not be read back "
                             "(Connection refused): nothing shows it worked",
                     verification=Verification.could_not_check("Connection refused"))
    for state in ("verified", "action_failed", "resolved"):
        lead = outcome_lead(state, LastOutcome.of(unread))
        assert lead.startswith("Could not check: ") and "Connection refused" in lead, lead
    nothing_ran = LastOutcome("Could not check the host before acting (host key mismatch)",
                              could_not_check="host key mismatch for gpu-01")
    assert outcome_lead("action_failed", nothing_ran).startswith(
        "Could not check: Could not check the host")
    msg = render_incident(Stored("action_failed", nothing_ran), DIAG, now=DONE_AT)
    text = "\n".join(s.text for s in msg.sections)
    assert ":grey_question: Could not check" in text and "Action failed" not in text
    assert "Fixed" not in text and "Verified" not in text


def test_done_but_not_fixed_when_the_headline_is_something_else() -> None:
    """A stop that verified beside a broken GPU, or while other GPUs stay held, is "Done",
    and the headline stays under it as what is not fixed."""
    ecc = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.4, (ECC, FINDING), (STOP,))
    msg = render_incident(Stored("verified", stopped()), ecc, now=DONE_AT)
    head = msg.sections[0].text.splitlines()
    assert head[0].startswith(f"*gpu-01: Done: {UNIT} stopped and disabled; 8/8 GPUs free"), head
    assert head[1].startswith("Not fixed by this: GPU 5"), head
    partly = outcome_lead("verified", stopped(detail="0/8 GPUs free (max 77600 MiB)"),
                          diagnosis=DIAG)
    assert partly.startswith("Done: ") and "0/8 GPUs free" in partly
    assert outcome_lead("verified", stopped(), diagnosis=DIAG).startswith("Fixed: ")


def test_revert_and_lasting_fix_leads() -> None:
    reverted = outcome_lead("verified", stopped("systemd.revert", REVERT.params,
                                                f"{UNIT} is active, unit file enabled"))
    assert reverted.startswith(f"Reverted: {UNIT} put back as it was (enabled, active); ")
    dropin = stopped("systemd.dropin", DROPIN.params, "drop-ins: x")
    guarded = outcome_lead("verified", dropin, earlier=[STOP, DROPIN])
    assert guarded == (f"Fixed: {UNIT} stopped and disabled; start guard added to {UNIT} "
                       "(drop-in)")
    stop = stopped().result
    assert dropin.result is not None and stop is not None
    results = [StepResult.of(stop), StepResult.of(dropin.result)]
    results = [StepResult.from_json(r.to_json()) for r in results]  # as stored
    assert outcome_lead("verified", dropin, [STOP, DROPIN], results=results) == (
        f"Fixed: {UNIT} stopped and disabled; start guard added to {UNIT} (drop-in); "
        "8/8 GPUs free since 11:02 UTC")
    assert StepResult.from_json({"ok": True, "text": "old"}) == StepResult(True, "old")
    assert StepResult(True, "old").to_json() == {"ok": True, "text": "old"}


def test_verified_message_moves_the_headline_below_as_was() -> None:
    plans = [ActionPlan(STOP, ("systemctl stop x",), "ap1")]
    msg = render_incident(Stored("verified", stopped()), DIAG, plans,
                          {"ap1": approval("ap1", ApprovalStatus.APPROVED)}, now=DONE_AT + 5)
    head = msg.sections[0].text.splitlines()
    assert head[0] == f"*gpu-01: Fixed: {UNIT} stopped and disabled; 8/8 GPUs free since " \
                      "11:02 UTC*"
    before = render_incident(Stored("awaiting_approval"), DIAG, plans, now=DONE_AT + 5)
    assert head[1] == "Was: " + before.sections[0].text.strip("*").removeprefix("gpu-01: ")
    assert msg.text.startswith(f"gpu-01: Fixed: {UNIT} stopped and disabled")


def test_withdrawn_expired_and_moot_offers_leave_the_message() -> None:
    plans = [ActionPlan(STOP, (), "ap1"), ActionPlan(DROPIN, (), "ap2"),
             ActionPlan(REVERT, (), "ap3")]
    status = {"ap1": ApprovalStatus.APPROVED, "ap2": ApprovalStatus.CANCELLED,
              "ap3": ApprovalStatus.EXPIRED}
    approvals = {k: approval(k, v) for k, v in status.items()}
    assert [p.approval_id for p in shown_plans("verified", plans, approvals)] == ["ap1"]
    assert [p.approval_id for p in shown_plans("expired", plans, approvals)] == ["ap1", "ap3"]
    approvals["ap2"] = approval("ap2", ApprovalStatus.PENDING)
    assert [p.approval_id for p in shown_plans("verified", plans, approvals)] == ["ap1", "ap2"]
    assert [p.approval_id for p in shown_plans("resolved", plans, approvals)] == ["ap1"]
    resolved = render_incident(Stored("resolved", stopped()), DIAG, plans, approvals,
                               now=DONE_AT)
    shown = "\n".join(s.text for s in resolved.sections) + "\n".join(resolved.context)
    assert "expires" not in shown and "Withdrawn" not in shown and "Keep" not in shown
    verified = render_incident(Stored("verified", stopped()), DIAG, plans, approvals,
                               now=DONE_AT)
    assert any("Approval expires" in c for c in verified.context)  # still open there


@pytest.mark.parametrize("kind", sorted(CATALOG))
def test_every_catalog_kind_reads_as_a_sentence(kind: str) -> None:
    params = {p.name: SAMPLE[p.name] for p in CATALOG[kind].params}
    phrase = action_phrase(ProposedAction("x", kind, params, "why", "risk"))
    assert not phrase.lower().startswith("run "), phrase
    assert kind not in phrase and "=" not in phrase and "marker" not in phrase, phrase


def test_dropin_and_revert_phrases() -> None:
    assert action_phrase(DROPIN).startswith(
        f"keep {UNIT} from grabbing the GPUs again: add a start guard (drop-in)")
    assert action_phrase(REVERT) == f"undo the fix: put {UNIT} back as it was (enabled, active)"


def test_revert_is_never_primary_and_always_confirms() -> None:
    plans = [ActionPlan(DROPIN, ("systemctl daemon-reload",), "ap2", destructive=False),
             ActionPlan(REVERT, ("systemctl enable x", "systemctl start x"), "ap3",
                        destructive=False)]
    for revert in (None, plans[1]):  # among the plans, or as the revert plan
        msg = render_incident(Stored("verified", stopped()), DIAG,
                              plans if revert is None else plans[:1], {}, revert=revert,
                              now=DONE_AT)
        elements = [e for b in bk.to_blocks(msg) if b["type"] == "actions"
                    for e in b["elements"] if e["value"] == "ap3"]
        revert_button = next(e for e in elements if e["text"]["text"] == "Revert")
        assert "style" not in revert_button
        assert "Undo the fix on gpu-01" in revert_button["confirm"]["text"]["text"]
        assert "systemctl start x" in revert_button["confirm"]["text"]["text"]
        assert not any(e["text"]["text"] == "Approve" for e in elements)
    buttons = [b for s in msg.sections for b in s.buttons if b.value == "ap2"]
    assert buttons[0].label == "Approve" and buttons[0].style is ButtonStyle.PRIMARY


def test_no_escalate_button_when_escalation_has_nowhere_to_go() -> None:
    labels = [b.label for b in incident_buttons("action_failed", "INC-1", False)]
    assert "Escalate" in labels
    labels = [b.label for b in incident_buttons("action_failed", "INC-1", False,
                                                can_escalate=False)]
    assert "Escalate" not in labels and "Retry" in labels
    msg = render_incident(Stored("action_failed"), DIAG, now=DONE_AT, can_escalate=False)
    assert "Escalate" not in [b.label for b in msg.buttons]


def test_terminate_names_every_rung() -> None:
    spec = CATALOG["process.terminate"]
    term = CommandRecord("term", "kill -TERM 38514", 0)
    killed = summarize(spec, "PID 38514", "gpu-01", Outcome.SUCCEEDED,
                       [term, CommandRecord("kill", "kill -KILL 38514", 0)],
                       Verification(Seen.FIXED, "8/8 GPUs free (max 0 MiB)"), grace_s=10.0)
    assert killed.startswith("sent SIGTERM to PID 38514, then SIGKILL after 10 s; 8/8 GPUs")
    exited = summarize(spec, "PID 38514", "gpu-01", Outcome.SUCCEEDED,
                       [term, CommandRecord("kill", "kill -KILL 38514",
                                            skipped="exited 2.3 s after SIGTERM")],
                       Verification(Seen.FIXED, "8/8 GPUs free (max 0 MiB)"), grace_s=10.0)
    assert exited.startswith("sent SIGTERM to PID 38514, which exited 2.3 s later")
    stuck = summarize(spec, "PID 38514", "gpu-01", Outcome.FAILED,
                      [term, CommandRecord("kill", "kill -KILL 38514", 0)],
                      Verification(Seen.NOT_FIXED, "GPU 0 still held"), grace_s=10.0)
    assert stuck == ("sent SIGTERM to PID 38514, then SIGKILL after 10 s, but the effect did "
                     "not show: GPU 0 still held")
    assert "terminated" not in killed + exited + stuck


def test_results_say_gib_and_plurals_agree() -> None:
    assert in_gib("0/2 GPUs free (max 40000 MiB)") == "0/2 GPUs free (max 39.1 GiB)"
    msg = render_incident(Stored("action_failed"), DIAG,
                          results=[StepResult(False, "GPU 0 still held (max 40000 MiB)")],
                          now=DONE_AT)
    text = "\n".join(s.text for s in msg.sections)
    assert "39.1 GiB" in text and "MiB" not in text
    one = action_phrase(ProposedAction("c", "disk.cleanup", {"paths": "/data/a"}, "", ""))
    two = action_phrase(ProposedAction("c", "disk.cleanup", {"paths": "/data/a|/b"}, "", ""))
    assert (one, two) == ("delete 1 listed file", "delete 2 listed files")
    assert not re.search(r"\(s\)", one + two)


def test_counts_agree_with_their_nouns() -> None:
    from bot.core import fmt

    assert (fmt.counted(1, "file"), fmt.counted(3, "file")) == ("1 file", "3 files")
    spec = CATALOG["systemd.stop_disable"]
    one = summarize(spec, UNIT, "gpu-01", Outcome.FAILED,
                    [CommandRecord("stop", "systemctl stop x", 0)],
                    Verification(Seen.NOT_FIXED, "held"))
    assert one.startswith("ran 1 command on gpu-01, but")
