"""Buttons are a function of state; the unhappy states explain themselves (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bot.chat.incident_view import Marks, incident_buttons, state_sections, status_lines
from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Seen, Verification
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.domain.incident_record import LastOutcome, Running, Snooze
from bot.domain.lifecycle import IncidentState
from bot.flow.diagnose_step import outcome_state

S = IncidentState
EXPECTED = {
    S.AWAITING_APPROVAL: ["Ack", "Snooze 30 min", "Snooze 2 h", "Snooze 1 d", "Resolve"],
    S.DIAGNOSIS_FAILED: ["Retry", "Ack", "Snooze 30 min", "Snooze 2 h", "Snooze 1 d", "Resolve"],
    S.NO_ACTION: ["Resolve", "Ack", "Snooze 30 min", "Snooze 2 h", "Snooze 1 d"],
    S.ACTION_FAILED: ["Retry", "Escalate", "Ack", "Resolve"],
    S.VERIFIED: ["Resolve"], S.RESUMED: ["Resolve"], S.SNOOZED: ["Resolve"],
    S.DENIED: ["Retry", "Resolve"], S.EXPIRED: ["Retry", "Resolve"],
    S.OPEN: [], S.DIAGNOSING: [], S.APPROVED: [], S.REMEDIATING: [], S.RESOLVED: [],
}


@pytest.mark.parametrize("state", list(IncidentState))
def test_buttons_per_state(state: IncidentState) -> None:
    buttons = incident_buttons(state.value, "42", acked=False)
    assert [b.label for b in buttons] == EXPECTED[state]
    assert all(b.value.split("|")[0] == "42" for b in buttons)


def test_ack_button_goes_once_acked_and_snooze_carries_its_duration() -> None:
    buttons = incident_buttons("awaiting_approval", "42", acked=True)
    assert "Ack" not in [b.label for b in buttons]
    assert [b.value for b in buttons if b.action_id == "incident_snooze"] == [
        "42|1800", "42|7200", "42|86400"]


def test_unhappy_states_say_why() -> None:
    (failed,) = state_sections("diagnosis_failed", None, ["SSH authentication to gpu-01 failed"])
    assert "Diagnosis failed" in failed.text and "authentication" in failed.text
    (nothing,) = state_sections("no_action", None, ["/data is 100% full"])
    assert "Nothing to run automatically" in nothing.text and "/data" in nothing.text
    result = ActionResult("systemd.stop_disable", {"unit": "x"}, "gpu-01", Outcome.TIMED_OUT,
                          "stop timed out", "UALICE", None, commands=(CommandRecord(
                              "stop", "systemctl stop x", None, 10.0, True, "", "<!channel>"),))
    (action,) = state_sections("action_failed", LastOutcome.of(result), [])
    assert "stop timed out" in action.text and action.code is not None
    assert "systemctl stop x" in action.code and "→ timed out" in action.code
    assert "exit None" not in action.code  # no exit status is said, never "None"
    held = replace(result, verification=Verification(Seen.NOT_FIXED,
                                                     "7/8 GPUs free (max 2048 MiB)"))
    (gib,) = state_sections("action_failed", LastOutcome.of(held), [])
    assert gib.code is not None and "verify: 7/8 GPUs free (max 2.0 GiB)" in gib.code
    assert "MiB" not in gib.code  # one unit family in the message
    (bare,) = state_sections("action_failed", LastOutcome("resume: gate failed"), [])
    assert "resume: gate failed" in bare.text and bare.code is None
    assert state_sections("verified", None, []) == []


def test_status_lines_name_people() -> None:
    said = "stop vllm.service and keep it from starting at boot"
    lines = status_lines(Marks(running=Running("systemd.stop_disable", "UALICE", 0.0, "a", said),
                               acked_by="UBOB", snooze=Snooze("UBOB", 0.0, "no_action")))
    assert lines[0] == f":arrows_counterclockwise: Approved by <@UALICE> · running: {said}…"
    assert any("Acknowledged by <@UBOB>" in line for line in lines)
    assert any("Snoozed by <@UBOB> until 1970-01-01 00:00" in line for line in lines)


def test_outcome_state_of_a_diagnosis() -> None:
    finding = Finding("x", Severity.WARNING, "t", "d")
    action = ProposedAction("a", "systemd.stop_disable", {"unit": "u"}, "r", "k")
    unreachable = Diagnosis("h", "p", DiagnosisStatus.UNREACHABLE, 0.0, (finding,))
    assert outcome_state(unreachable, 0) is S.DIAGNOSIS_FAILED
    ok = Diagnosis("h", "p", DiagnosisStatus.OK, 0.1, (finding,), (action,))
    assert outcome_state(ok, 1) is S.AWAITING_APPROVAL
    assert outcome_state(ok, 0) is S.NO_ACTION
    assert outcome_state(Diagnosis("h", "p", DiagnosisStatus.OK, 0.1), 0) is S.RESOLVED
