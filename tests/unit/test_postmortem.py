"""The postmortem builder and renderers over hand-built audit rows (pure, no Redis)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bot.digest.postmortem import (
    PostmortemFacts,
    Step,
    affected_gpus,
    build_postmortem,
    facts_from_incident,
    gpu_hours,
)
from bot.digest.postmortem_render import to_json, to_markdown
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.domain.incident import Incident
from bot.domain.incident_record import ActionPlan, ChatRefs
from bot.domain.lifecycle import IncidentState

T0 = 1_800_000_000.0


@dataclass(frozen=True)
class Row:
    ts: float
    actor: str
    action: str
    detail: dict[str, Any] = field(default_factory=dict)
    evidence_hash: str | None = None


def _diag(n_gpus: int, info_gpus: int = 0) -> Diagnosis:
    held = {"gpus": [{"index": i} for i in range(n_gpus)]}
    free = {"gpus": [{"index": i} for i in range(100, 100 + info_gpus)]}
    return Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.5, findings=(
        Finding("gpu.idle_vram_held", Severity.CRITICAL, "held", evidence=held),
        Finding("gpu.free", Severity.INFO, "free ones", evidence=free)))


def _tr(ts: float, a: str, b: str, actor: str = "bot", reason: str = "") -> Row:
    return Row(ts, actor, "transition", {"from": a, "to": b, "reason": reason})


def _incident(resolved: float | None = None) -> Incident:
    return Incident("INC-7", "gpu-01", "vram_idle", state=IncidentState.RESOLVED if resolved
                    else IncidentState.VERIFIED, summary="idle VRAM on gpu-01",
                    severity=Severity.CRITICAL, first_seen=T0, resolved_at=resolved)


STOP = {"kind": "systemd.stop_disable", "params": {"unit": "x.service"}, "outcome": "succeeded",
        "approver": "UBOB", "revertable": True,
        "revert_params": {"unit": "x.service", "unit_file_state": "enabled"},
        "commands": [{"command": "systemctl stop x.service", "exit_status": 0},
                     {"command": "systemctl disable x.service", "exit_status": None,
                      "timed_out": True}],
        "verification": {"detail": "8/8 GPUs free", "evidence": {}}}
ROWS = [Row(T0, "alertmanager", "opened", {"summary": "idle"}),
        _tr(T0 + 0.1, "open", "diagnosing"), _tr(T0 + 1, "diagnosing", "awaiting_approval",
                                                 reason="2 findings"),
        Row(T0 + 30, "UMALLORY", "approval.refused", {"kind": "systemd.stop_disable"}),
        Row(T0 + 60, "UBOB", "approval.approved", {"kind": "systemd.stop_disable"}),
        _tr(T0 + 60, "awaiting_approval", "approved", "UBOB"),
        _tr(T0 + 61, "approved", "remediating", "UBOB"),
        Row(T0 + 64, "UBOB", "action.succeeded", STOP, "sha256:abc"),
        _tr(T0 + 64, "remediating", "verified", reason="freed"),
        _tr(T0 + 3600, "verified", "resolved", "UCAROL", "resolved by a person")]


def test_the_timeline_orders_the_steps_and_measures_from_detection() -> None:
    facts = PostmortemFacts(diagnosis=_diag(8), message_at=T0 + 1.2)
    pm = build_postmortem(_incident(T0 + 3600), ROWS, facts)
    assert [e.step for e in pm.events] == [
        Step.DETECTED, Step.DIAGNOSED, Step.FIRST_MESSAGE, Step.APPROVED, Step.ACTION,
        Step.VERIFIED, Step.RESOLVED]
    assert [round(e.since_s, 1) for e in pm.events] == [0, 1, 1.2, 60, 64, 64, 3600]
    assert pm.events[3].who == "UBOB"  # who approved; the refused click is no step
    assert pm.events[4].what == ("systemd.stop_disable unit=x.service: succeeded "
                                 "(exit 0, timeout)")
    assert (pm.tta_s, pm.acked_by, pm.ttm_s, pm.ttr_s) == (60, "UBOB", 64, 3600)
    assert pm.gpus == 8 and pm.gpu_hours_lost == 8 * 64 / 3600
    assert pm.people == ("UBOB",)


def test_an_ack_before_the_approval_is_the_acknowledgement() -> None:
    rows = [*ROWS[:3], Row(T0 + 20, "UALICE", "incident.ack"), *ROWS[3:]]
    pm = build_postmortem(_incident(), rows, PostmortemFacts())
    assert (pm.tta_s, pm.acked_by) == (20, "UALICE")
    assert Step.ACKNOWLEDGED in [e.step for e in pm.events]


def test_nothing_done_yet_leaves_the_durations_unknown() -> None:
    pm = build_postmortem(_incident(), ROWS[:3], PostmortemFacts(diagnosis=_diag(2)))
    assert (pm.tta_s, pm.ttm_s, pm.ttr_s, pm.gpu_hours_lost) == (None, None, None, None)
    assert pm.changes == () and "not yet" in to_markdown(pm)


def test_host_changes_carry_their_commands_and_the_revert_line() -> None:
    facts = PostmortemFacts(revert_kind="systemd.revert", revert_commands=("systemctl start x",))
    (change,) = build_postmortem(_incident(), ROWS, facts).changes
    assert [(c.command, c.exit_status, c.timed_out) for c in change.commands] == [
        ("systemctl stop x.service", 0, False), ("systemctl disable x.service", None, True)]
    assert change.revert == ("incident-bot act gpu-01 systemd.revert unit=x.service "
                             "unit_file_state=enabled")
    assert change.revert_commands == ("systemctl start x",)


def test_an_action_with_no_host_commands_is_not_a_host_change() -> None:
    resume = Row(T0 + 70, "UBOB", "action.succeeded", {"kind": "extraction.resume",
                                                        "commands": [], "outcome": "succeeded"})
    assert len(build_postmortem(_incident(), [*ROWS, resume], PostmortemFacts()).changes) == 1


def test_gpu_count_ignores_info_findings_and_counts_each_gpu_once() -> None:
    assert affected_gpus(_diag(4, info_gpus=3)) == 4
    assert affected_gpus(None) == 0
    assert gpu_hours(8, T0, T0 + 1800) == 4.0 and gpu_hours(8, T0, None) is None


def test_facts_come_from_the_incident_record() -> None:
    revert = ActionPlan(ProposedAction("r", "systemd.revert", {"unit": "x"}, "undo"), ("a", "b"),
                        "ap-1")
    incident = Incident("INC-1", "h", "k", first_seen=T0, diagnosis=_diag(1),
                        chat=ChatRefs("C1", f"{T0 + 2:.6f}", f"{T0 + 2:.6f}", "u"),
                        revert_plan=revert, evidence_hash="sha256:x")
    facts = facts_from_incident(incident)
    assert facts.message_at == T0 + 2 and facts.permalink == "u"
    assert facts.revert_commands == ("a", "b") and facts.evidence_hash == "sha256:x"
    assert facts.revert_kind == "systemd.revert" and facts.diagnosis == _diag(1)
    terminal = facts_from_incident(Incident("INC-1", "h", "k", first_seen=T0,
                                            chat=ChatRefs("C1", "1", "1")))
    assert terminal.message_at is None and terminal.diagnosis is None  # not a Slack ts


def test_markdown_and_json_say_the_same() -> None:
    pm = build_postmortem(_incident(T0 + 3600), ROWS, PostmortemFacts(diagnosis=_diag(8)))
    md = to_markdown(pm)
    assert md.startswith("# INC-7 postmortem: idle VRAM on gpu-01\n")
    assert "| Time to acknowledge | 1 min (UBOB) |" in md
    assert "| GPU-hours lost | 0.142 (8 GPUs × 1 min, detection to mitigation) |" in md
    assert "| 2027-01-15 08:01:04 | +1 min | verified | bot | freed |" in md
    data = json.loads(to_json(pm))
    assert data["tta_s"] == 60 and data["events"][-1]["step"] == "resolved"
    assert data["events"][0]["at_utc"] == "2027-01-15T08:00:00Z"


def test_a_pipe_in_a_reason_does_not_break_the_table() -> None:
    rows = [*ROWS[:2], _tr(T0 + 1, "diagnosing", "no_action", reason="a | b\nc")]
    md = to_markdown(build_postmortem(_incident(), rows, PostmortemFacts()))
    assert "| a \\| b c |" in md


def test_the_thread_text_is_the_short_version() -> None:
    from bot.digest.postmortem_render import to_thread_text

    pm = build_postmortem(_incident(T0 + 3600), ROWS, PostmortemFacts(diagnosis=_diag(8)))
    assert to_thread_text(pm).splitlines() == [
        "*Postmortem INC-7*: acknowledged in 1 min (UBOB), mitigated in 1 min, resolved in 1 h; "
        "0.14 GPU-hours lost (8 GPUs).",
        "Changed on gpu-01: `systemd.stop_disable` unit=x.service (succeeded); revert: "
        "`incident-bot act gpu-01 systemd.revert unit=x.service unit_file_state=enabled`",
        "The full timeline: `incident-bot postmortem INC-7`"]


def test_response_stats_per_kind_and_host() -> None:
    from bot.digest.response_stats import one_click, response_stats, stats_lines

    fixed = build_postmortem(_incident(T0 + 3600), ROWS, PostmortemFacts())
    failed_rows = [*ROWS[:7], _tr(T0 + 64, "remediating", "action_failed")]
    failed = build_postmortem(_incident(), failed_rows, PostmortemFacts())
    assert one_click(fixed) and not one_click(failed)
    (row,) = response_stats([fixed, failed])
    # MTTR: to the verified fix that held (64 s), not to the person's resolve an hour on;
    # the failed one recovered never (no fix, no resolve): it does not count in the mean
    assert (row.key, row.incidents, row.mtta_s, row.mttr_s, row.one_click) == (
        "vram_idle", 2, 60, 64, 1)
    assert stats_lines([row]) == ["*vram_idle*: 2 incidents · MTTA 1 min · MTTR 1 min · "
                                  "fixed with one click 50.0%"]
    assert [r.key for r in response_stats([fixed], key=lambda pm: pm.host)] == ["gpu-01"]


def test_a_reverted_fix_is_not_one_click_and_recovers_only_when_fixed_again() -> None:
    from bot.digest.response_stats import one_click

    facts = PostmortemFacts(revert_kind="systemd.revert")
    undone = [*ROWS[:9], Row(T0 + 100, "UBOB", "approval.approved", {"kind": "systemd.revert"}),
              _tr(T0 + 101, "verified", "remediating", "UBOB"),
              Row(T0 + 103, "incident-bot", "action.succeeded", {"kind": "systemd.revert"}),
              _tr(T0 + 104, "remediating", "verified", reason="reverted")]
    reverted = build_postmortem(_incident(), undone, facts)
    assert reverted.reverted and reverted.recovered_s is None and not one_click(reverted)
    again = build_postmortem(_incident(), [
        *undone, Row(T0 + 200, "incident-bot", "action.succeeded", {"kind": "systemd.mask"}),
        _tr(T0 + 205, "remediating", "verified", reason="freed")], facts)
    assert not again.reverted and again.recovered_s == 205
