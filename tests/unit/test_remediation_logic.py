"""Pure remediation logic: skip rules, outcomes, summaries, state round trips, parsers."""

from __future__ import annotations

import json

import pytest

from bot.core.errors import ConfigError
from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Seen, Verification
from bot.domain.host_state import CapturedState, GpuHolder, GpuState, ProcState, UnitState
from bot.remediation import catalog
from bot.remediation.catalog import RemoteStep
from bot.remediation.followup import offers
from bot.remediation.options import options_from_extra
from bot.remediation.outcome import decide, summarize
from bot.remediation.steps import hard_failure, skip_reason
from bot.remediation.verify import gpu_detail, gpu_range, others_on
from playbooks.parsers.common import size_bytes
from playbooks.parsers.nvidia import parse_gpu_states
from playbooks.parsers.ps import cgroup_units

UNIT = "vllm-kimi-k25-int4.service"
ACTIVE = UnitState(UNIT, "loaded", "active", "running", "enabled", 440, "always", "", (440,))
STOPPED = UnitState(UNIT, "loaded", "inactive", "dead", "disabled", 0, "always", "", ())


def _step(name: str) -> RemoteStep:
    return RemoteStep(name, ("systemctl", name, UNIT), 1.0)


@pytest.mark.parametrize(
    ("verb", "unit", "skipped"),
    [
        ("stop", ACTIVE, False),
        ("stop", STOPPED, True),
        ("disable", ACTIVE, False),
        ("disable", STOPPED, True),
        ("enable", ACTIVE, True),
        ("enable", STOPPED, False),
        ("start", ACTIVE, True),
        ("start", STOPPED, False),
        ("mask", STOPPED, False),
        ("unmask", STOPPED, True),
    ],
)
def test_a_step_is_skipped_exactly_when_its_effect_already_holds(
    verb: str, unit: UnitState, skipped: bool
) -> None:
    assert (skip_reason(_step(verb), unit) is not None) is skipped


def test_terminate_and_vacuum_skip_rules() -> None:
    term = RemoteStep("term", ("kill", "-TERM", "440"), 1.0)
    assert skip_reason(term, proc=ProcState(440, alive=False)) == "process already gone"
    assert skip_reason(term, proc=ProcState(440, alive=True)) is None
    vacuum = RemoteStep("vacuum", ("journalctl", "--vacuum-size=500M"), 1.0)
    assert skip_reason(vacuum, journal=(100 << 20, 500 << 20)) is not None
    assert skip_reason(vacuum, journal=(4 << 30, 500 << 20)) is None


def _rec(name: str = "stop", **kw: object) -> CommandRecord:
    base: dict[str, object] = {
        "name": name,
        "command": f"systemctl {name} {UNIT}",
        "exit_status": 0,
        "duration_s": 0.2,
        "timeout_s": 15.0,
    }
    base.update(kw)
    return CommandRecord(**base)  # type: ignore[arg-type]


OK = Verification(Seen.FIXED, "8/8 GPUs free (max 0 MiB)", 1.0)
HELD = Verification(Seen.NOT_FIXED, "still held", 30.0)


def test_outcomes() -> None:
    assert decide([_rec(), _rec("disable")], OK) is Outcome.SUCCEEDED
    assert decide([_rec(skipped="already inactive")], OK, noop=True) is Outcome.NOOP
    assert decide([_rec(exit_status=124, timed_out=True)], OK) is Outcome.TIMED_OUT_BUT_DONE
    assert decide([_rec(exit_status=124, timed_out=True)], HELD) is Outcome.TIMED_OUT
    back = Verification(Seen.NOT_FIXED, "came back", 0.5, respawned=True)
    assert decide([_rec()], back) is Outcome.RESPAWNED
    others = Verification(Seen.NOT_FIXED, "held", 30.0, evidence={"held_by_others": True})
    assert decide([_rec()], others) is Outcome.STILL_HELD
    assert decide([_rec(exit_status=1, reprobe={"effect": False})], OK) is Outcome.FAILED
    assert decide([_rec()], HELD) is Outcome.FAILED


def test_a_failed_command_whose_effect_holds_is_not_a_hard_failure() -> None:
    assert hard_failure(_rec(exit_status=1, reprobe={"effect": False}))
    assert not hard_failure(_rec(exit_status=1, reprobe={"effect": True}))
    assert not hard_failure(_rec(exit_status=124, timed_out=True))


def test_summary_reads_like_the_story() -> None:
    spec = catalog.get("systemd.stop_disable")
    records = [_rec(duration_s=0.1), _rec("disable", duration_s=0.1)]
    text = summarize(spec, UNIT, "gpu-01", Outcome.SUCCEEDED, records, OK)
    assert text == f"stopped and disabled {UNIT}; 8/8 GPUs free (max 0 MiB) after 1.2 s"
    late = [_rec(exit_status=124, timed_out=True, timeout_s=2.0), _rec("disable")]
    text = summarize(spec, UNIT, "gpu-01", Outcome.TIMED_OUT_BUT_DONE, late, OK)
    assert text.startswith(f"`systemctl stop {UNIT}` hit its 2 s deadline, yet the re-probe")
    failed = [
        _rec(exit_status=1, stderr="Failed to stop: Access denied\n", reprobe={"effect": False})
    ]
    text = summarize(spec, UNIT, "gpu-01", Outcome.FAILED, failed, HELD)
    assert "failed (exit 1): Failed to stop: Access denied" in text
    noop = [_rec(skipped="already inactive"), _rec("disable", skipped="unit file already disabled")]
    text = summarize(spec, UNIT, "gpu-01", Outcome.NOOP, noop, OK)
    assert "nothing to do (already inactive; unit file already disabled)" in text


def _captured() -> CapturedState:
    gpus = tuple(GpuState(i, f"GPU-{i}", 77600.0, 97887.0) for i in range(8))
    holders = tuple(GpuHolder(440, f"GPU-{i}", 77600.0, UNIT) for i in range(8))
    return CapturedState(
        "systemd.stop_disable",
        {"unit": UNIT},
        "gpu-01",
        1.0,
        units=(ACTIVE,),
        gpus=gpus,
        holders=holders,
        journal_bytes=None,
    )


def test_affected_gpus_follow_the_holders_or_every_used_gpu_when_pids_are_hidden() -> None:
    cap = _captured()
    assert cap.affected_gpus({440}, 1024) == tuple(range(8))
    assert cap.affected_gpus({999}, 1024) == ()
    hidden = CapturedState(cap.kind, cap.params, cap.host, 1.0, units=cap.units, gpus=cap.gpus)
    assert hidden.affected_gpus({440}, 1024) == tuple(range(8))


def test_a_stop_is_judged_on_its_own_holder_not_a_neighbour_on_the_same_gpu() -> None:
    """two_holders: the unit's PID 440 on every GPU, a user's sweep (PID 3391, 2 GiB) on
    GPU 0. After the stop GPU 0 still shows the sweep's 2 GiB: free of it, and so counted;
    a GPU holding more than the neighbour had (the unit back) is not."""
    cap = _captured()
    cap = CapturedState(cap.kind, cap.params, cap.host, 1.0, units=cap.units, gpus=cap.gpus,
                        holders=(*cap.holders, GpuHolder(3391, "GPU-0", 2048.0, "session-1.scope")))
    others = others_on(cap, {440}, UNIT)
    assert others == {0: 2048.0}
    # a holder under the unit itself is the unit's (a respawn counts against the stop)
    assert others_on(cap, {999}, UNIT) == {0: 2048.0}
    after = [GpuState(0, "GPU-0", 2048.0, 97887.0),
             *(GpuState(i, f"GPU-{i}", 0.0, 97887.0) for i in range(1, 8))]
    assert gpu_detail(after, tuple(range(8)), 1024, others) == "8/8 GPUs free of it"
    back = [GpuState(0, "GPU-0", 79648.0, 97887.0), *after[1:]]
    assert gpu_detail(back, tuple(range(8)), 1024, others) == "7/8 GPUs free of it"
    assert gpu_detail(after, tuple(range(8)), 1024) == "7/8 GPUs free (max 2048 MiB)"


def test_result_round_trips_through_json_with_its_capture() -> None:
    cap = _captured()
    result = ActionResult(
        kind="systemd.stop_disable",
        params={"unit": UNIT},
        host="gpu-01",
        outcome=Outcome.SUCCEEDED,
        summary="ok",
        approver="U1",
        evidence_hash="sha256:ab",
        planned=("systemctl stop x",),
        commands=(_rec(reprobe={"effect": True, "after_s": 0.1}),),
        captured=cap,
        verification=OK,
        revert_params={"unit": UNIT, "unit_file_state": "enabled", "active_state": "active"},
        incident_id="INC-1",
    )
    again = ActionResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result
    assert again.revertable and again.captured is not None
    assert again.captured.units[0].pids == (440,)


def test_offers_revert_first_then_resume_only_after_freeing_gpus() -> None:
    back = {"unit": UNIT, "unit_file_state": "enabled", "active_state": "active"}
    result = ActionResult(
        kind="systemd.stop_disable",
        params={"unit": UNIT},
        host="gpu-01",
        outcome=Outcome.SUCCEEDED,
        summary="ok",
        approver="U1",
        evidence_hash=None,
        revert_params=back,
    )
    kinds = [(a.kind, a.params) for a in offers(result, ["ex-0000000000b1"])]
    assert kinds == [
        ("systemd.revert", result.revert_params),
        ("extraction.resume", {"job": "ex-0000000000b1"}),
    ]
    failed = ActionResult(**{**result.__dict__, "outcome": Outcome.RESPAWNED})
    assert [a.kind for a in offers(failed, ["ex-0000000000b1"])] == ["systemd.revert"]


def test_probe_parsers_on_real_formats() -> None:
    gpus = parse_gpu_states(
        "0, GPU-aa, 77600, 97887, 0, NVIDIA RTX PRO 6000\n"
        "1, GPU-bb, [N/A], 97887, 0, NVIDIA RTX PRO 6000\n"
    )
    assert gpus == [GpuState(0, "GPU-aa", 77600.0, 97887.0)]
    cgroups = cgroup_units(
        "  440 0::/system.slice/vllm-kimi-k25-int4.service\n    1 0::/init.scope\n  900 -\n"
    )
    assert cgroups == {440: UNIT, 1: "init.scope", 900: None}
    assert size_bytes("500M") == 500 << 20


def test_gpu_range_reads_like_nvidia_smi_minus_i() -> None:
    assert gpu_range(list(range(8))) == "0-7"
    assert gpu_range([0, 2]) == "0,2"


def test_settings_are_validated_with_the_key_named() -> None:
    assert options_from_extra({"remediation": {"verify_timeout_s": 5}}).verify_timeout_s == 5
    with pytest.raises(ConfigError, match=r"extra\.remediation\.verify_timeout_s"):
        options_from_extra({"remediation": {"verify_timeout_s": -1}})
    with pytest.raises(ConfigError, match=r"extra\.remediation\.bogus"):
        options_from_extra({"remediation": {"bogus": 1}})
