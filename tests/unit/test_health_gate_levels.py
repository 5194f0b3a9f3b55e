"""The graded health gate's judges (pure) and its configuration: readings, dcgmi diag,
the CUDA smoke against the node's last good run, and what a gate's result says."""

from __future__ import annotations

import json

import pytest

from bot.config.gate import gate_settings, policy_for
from bot.config.settings import Settings
from bot.core.errors import ConfigError
from bot.domain.findings import ProbeResult
from playbooks.health_gate import (
    GateLevel,
    GatePolicy,
    GateResult,
    LevelResult,
    LevelStatus,
    Readings,
    judge_dcgm,
    judge_smoke,
    new_xids,
    readings,
    smoke_command,
)
from playbooks.parsers.dcgm import parse_diag_json
from playbooks.parsers.kernel import KernelReport, parse_kernel_log
from playbooks.parsers.nvidia_xml import GpuHealth
from playbooks.parsers.smoke import SmokeGpu, parse_smoke
from playbooks.smoke import MARKER
from playbooks.verdict import GpuVerdict, GpuView, HealthFacts

POLICY = GatePolicy()
BOOT = 1_700_000_000.0


def result(stdout: str = "", status: int | None = 0, timed_out: bool = False) -> ProbeResult:
    return ProbeResult("x", "x", status, 1.5, timed_out, stdout)


def facts(xids: str = "", xml: list[GpuHealth] | None = None, expected: int = 2) -> HealthFacts:
    return HealthFacts([], xml or [], parse_kernel_log(xids) if xids else KernelReport([], [], []),
                       [], {}, {}, [], expected)


def grid() -> list[GpuView]:
    return [GpuView(0, "0000:18:00", "GPU-0", verdict=GpuVerdict.FREE),
            GpuView(1, "0000:2a:00", "GPU-1", verdict=GpuVerdict.FREE)]


NVRM = "gpu-01 kernel: NVRM: Xid (PCI:0000:2a:00)"
XID79 = f"{BOOT + 100:.6f} {NVRM}: 79, pid=1, name=x, GPU has fallen off the bus.\n"
XID13 = f"{BOOT + 900:.6f} {NVRM}: 13, pid=1, name=x, Graphics Exception\n"


def test_readings_since_a_repair_counts_only_newer_gpu_xids() -> None:
    f = facts(XID79 + XID13)
    level = readings("gpu-01", Readings(f, grid(), [], kernel_text=XID79 + XID13),
                     need_mib=0, since=BOOT + 500, policy=POLICY)
    assert level.status is LevelStatus.PASSED, level.reasons  # 79 before, 13 is the app's
    late = f"{BOOT + 800:.6f} k: NVRM: Xid (PCI:0000:2a:00): 48, pid=1, name=x, DBE\n"
    again = readings("gpu-01", Readings(facts(late), grid(), [], kernel_text=late),
                     need_mib=0, since=BOOT + 500, policy=POLICY)
    assert again.status is LevelStatus.FAILED
    assert again.reasons[0].startswith("Xid 48 on 0000:2a:00 since the repair at ")
    assert again.checks["no new Xid since the repair"] is False


def test_an_xid_of_unknown_time_counts_as_new() -> None:
    line = "Dec 05 10:02:11 gpu-01 kernel: NVRM: Xid (PCI:0000:2a:00): 79, GPU has fallen off\n"
    (event,) = parse_kernel_log(line).xids
    assert new_xids([event], BOOT + 10**6, BOOT) == [event]
    dmesg = parse_kernel_log("[  812.3] NVRM: Xid (PCI:0000:2a:00): 79, x\n").xids
    assert new_xids(dmesg, BOOT + 900, BOOT) == [] and new_xids(dmesg, BOOT + 800, BOOT) == dmesg


def test_readings_rows_pages_fabric_and_count() -> None:
    xml = [GpuHealth("0000:18:00", "", "GPU-0", "H100", remap_pending=True,
                     fabric_state="Completed"),
           GpuHealth("0000:2a:00", "", "GPU-1", "H100", retired_sbe=50, retired_dbe=12)]
    level = readings("gpu-01", Readings(facts(xml=xml, expected=3), grid(), [],
                                        fabric_state="inactive"),
                     need_mib=0, since=None, policy=POLICY)
    assert level.status is LevelStatus.FAILED
    assert level.reasons == (
        "GPU count 2 of 3", "row remap pending on 0000:18:00 (applied at the next reset)",
        "62 retired pages on 0000:2a:00 (the limit is 60, or a retirement is pending)",
        "nvidia-fabricmanager is inactive on an NVSwitch host")


def diag(*tests: tuple[str, str]) -> str:
    return json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": n, "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1,
                                 "status": s}], "test_summary": {"status": s}}
        for n, s in tests]}]}})


def test_dcgm_runs_in_order_and_the_first_failure_ends_it() -> None:
    ok = diag(("software", "Pass"))
    bad = diag(("memory", "Fail"))
    passed = judge_dcgm([(1, result(ok), parse_diag_json(ok)),
                         (2, result(ok), parse_diag_json(ok))])
    assert passed.status is LevelStatus.PASSED
    assert passed.checks == {"dcgmi diag -r 1": True, "dcgmi diag -r 2": True}
    failed = judge_dcgm([(1, result(ok), parse_diag_json(ok)),
                         (2, result(bad, 226), parse_diag_json(bad))])
    assert failed.status is LevelStatus.FAILED
    assert failed.reasons == ("dcgmi diag -r 2: memory failed on GPU 1",)
    absent = judge_dcgm([(1, result("dcgmi: not installed\n"),
                          parse_diag_json("dcgmi: not installed\n"))])
    assert absent.status is LevelStatus.ABSENT
    hung = judge_dcgm([(2, result("", None, True), parse_diag_json(""))])
    assert hung.status is LevelStatus.COULD_NOT_RUN and "no answer within 1.5 s" in hung.reasons[0]


def smoke_out(*gpus: dict[str, object], done: bool = True) -> str:
    rows = [json.dumps({"smoke": 1, **g}) for g in gpus]
    return "\n".join(rows + ([json.dumps({"smoke": 1, "done": True, "torch": "2.4"})] if done
                             else [])) + "\n"


GOOD = {"GPU-0": SmokeGpu(0, "GPU-0", matmul_tflops=600.0, mem_gbps=2900.0, h2d_gbps=50.0)}


def test_smoke_against_the_last_good_run() -> None:
    text = smoke_out({"gpu": 0, "uuid": "GPU-0", "matmul_tflops": 590.0, "mem_gbps": 2000.0,
                      "h2d_gbps": 25.0, "errors": []})
    level = judge_smoke(result(text), parse_smoke(text), GOOD, 1, POLICY)
    assert level.status is LevelStatus.FAILED
    assert level.reasons == (
        "CUDA smoke on GPU 0: memory sweep 2000 GB/s, 69% of its last good 2900 GB/s",
        "CUDA smoke on GPU 0: host-to-device copy 25 GB/s, 50% of its last good 50 GB/s")
    first = judge_smoke(result(text), parse_smoke(text), {}, 1, POLICY)
    assert first.status is LevelStatus.PASSED  # no baseline yet: this run becomes it


def test_smoke_errors_missing_gpus_and_runs_that_say_nothing() -> None:
    text = smoke_out({"gpu": 0, "uuid": "GPU-0", "errors": ["3 word(s) read back wrong"]})
    level = judge_smoke(result(text, 1), parse_smoke(text), {}, 2, POLICY)
    assert level.reasons == ("CUDA smoke on GPU 0: 3 word(s) read back wrong",
                             "CUDA smoke saw 1 of 2 GPUs")
    cut = smoke_out({"gpu": 0, "uuid": "GPU-0", "errors": []}, done=False)
    assert judge_smoke(result(cut, None, True), parse_smoke(cut), {}, 1,
                       POLICY).status is LevelStatus.COULD_NOT_RUN
    no_cuda = '{"smoke": 1, "error": "torch sees no CUDA device"}\n'
    assert judge_smoke(result(no_cuda, 3), parse_smoke(no_cuda), {}, 1,
                       POLICY).status is LevelStatus.COULD_NOT_RUN
    no_torch = '{"smoke": 1, "error": "torch is not importable here: No module"}\n'
    assert judge_smoke(result(no_torch, 3), parse_smoke(no_torch), {}, 1,
                       POLICY).status is LevelStatus.ABSENT


def test_smoke_command_sends_the_script_quoted_on_stdin() -> None:
    cmd = smoke_command(GatePolicy(smoke_python="/opt/venv/bin/python"))
    head = cmd.splitlines()[0]
    assert head.startswith(f"/opt/venv/bin/python - {MARKER} --matmul-n 8192")
    assert head.endswith("<<'INCIDENT_BOT_SMOKE_EOF'") and cmd.endswith("\nINCIDENT_BOT_SMOKE_EOF")
    assert "def main(argv" in cmd


def lv(level: GateLevel, status: LevelStatus) -> LevelResult:
    return LevelResult(level, status, 0.5)


def test_passed_reached_and_what_blocks() -> None:
    r, d, s = GateLevel.READINGS, GateLevel.DCGM, GateLevel.SMOKE
    ok = GateResult("gpu-01", (lv(r, LevelStatus.PASSED), lv(d, LevelStatus.ABSENT),
                               lv(s, LevelStatus.PASSED)))
    assert ok.passed and ok.reached == 3
    assert ok.summary == ("Reached level 3 of the gate: 1 readings passed (0.5 s); 2 dcgm not on "
                          "this host (0.5 s); 3 smoke passed (0.5 s).")
    strict = GateResult("gpu-01", ok.levels, frozenset({r, d}))
    assert not strict.passed and strict.reached == 1
    cut = GateResult("gpu-01", (lv(r, LevelStatus.PASSED), lv(d, LevelStatus.COULD_NOT_RUN),
                                LevelResult(s, LevelStatus.NOT_REACHED)))
    assert not cut.passed and cut.reached == 1 and "3 smoke not reached" in cut.summary
    assert not GateResult("gpu-01").passed  # no level ran: nothing was seen


def test_gate_config_groups_and_errors() -> None:
    s = Settings(extra={"gate": {"levels": ["readings", "smoke"], "groups": [
        {"hosts": "dgx-*", "levels": ["readings", "dcgm"], "dcgm_runs": [1],
         "required": ["readings", "dcgm"]}]}})
    assert policy_for(s, "gpu-01").levels == (GateLevel.READINGS, GateLevel.SMOKE)
    dgx = policy_for(s, "dgx-07")
    assert dgx.levels == (GateLevel.READINGS, GateLevel.DCGM) and dgx.dcgm_runs == (1,)
    assert dgx.required == frozenset({GateLevel.READINGS, GateLevel.DCGM})
    with pytest.raises(ConfigError, match=r"extra\.gate\.levels\.0"):
        gate_settings(Settings(extra={"gate": {"levels": ["smoek"]}}))
    with pytest.raises(ConfigError, match=r"dcgmi diag levels are 1\.\.4"):
        gate_settings(Settings(extra={"gate": {"dcgm_runs": [5]}}))
    with pytest.raises(ConfigError, match=r"extra\.gate\.smoke\.python"):
        gate_settings(Settings(extra={"gate": {"smoke": {"python": "python3; rm -rf /"}}}))
