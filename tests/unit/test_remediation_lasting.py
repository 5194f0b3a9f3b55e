"""The lasting fix is offered only after a verified stop/disable of a unit systemd restarts."""

from __future__ import annotations

from dataclasses import replace

from bot.domain.action_result import ActionResult, Outcome
from bot.domain.host_state import CapturedState, UnitState
from bot.remediation.followup import lasting_fixes, offers

UNIT = "vllm-kimi-k25-int4.service"
ALWAYS = UnitState(UNIT, "loaded", "active", "running", "enabled", 440, "always", "", (440,))


def _result(unit: UnitState, outcome: Outcome = Outcome.SUCCEEDED,
            kind: str = "systemd.stop_disable") -> ActionResult:
    captured = CapturedState(kind, {"unit": UNIT}, "gpu-01", 1.0, units=(unit,))
    return ActionResult(kind=kind, params={"unit": UNIT}, host="gpu-01", outcome=outcome,
                        summary="ok", approver="U1", evidence_hash=None, captured=captured)


def test_a_verified_stop_of_a_restarting_unit_offers_the_dropin_last() -> None:
    fixes = lasting_fixes(_result(ALWAYS))
    assert [(f.kind, f.params["unit"]) for f in fixes] == [("systemd.dropin", UNIT)]
    assert "Restart=always" in fixes[0].reason
    assert offers(_result(ALWAYS))[-1] == fixes[0]


def test_no_dropin_for_restart_no_a_failure_or_another_kind() -> None:
    assert lasting_fixes(_result(replace(ALWAYS, restart="no"))) == []
    assert lasting_fixes(_result(ALWAYS, Outcome.FAILED)) == []
    assert lasting_fixes(_result(ALWAYS, Outcome.REFUSED)) == []
    assert lasting_fixes(_result(ALWAYS, kind="systemd.mask")) == []


def test_every_rung_that_frees_gpus_offers_the_interrupted_jobs_resume() -> None:
    from bot.remediation.followup import resume_actions

    job = "ex-0000000000c1"
    for kind, params in (("gpu.reset", {"gpu": "0"}), ("process.sigkill", {"pid": "777"})):
        done = ActionResult(kind=kind, params=params, host="gpu-03", outcome=Outcome.SUCCEEDED,
                            summary="ok", approver="U1", evidence_hash=None)
        assert [a.params for a in resume_actions(done, [job])] == [{"job": job}]
        assert resume_actions(replace(done, outcome=Outcome.FAILED), [job]) == []
    journal = ActionResult(kind="disk.journal_vacuum", params={"size": "1G"}, host="gpu-03",
                           outcome=Outcome.SUCCEEDED, summary="ok", approver="U1",
                           evidence_hash=None)
    assert resume_actions(journal, [job]) == []
