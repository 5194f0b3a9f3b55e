"""The sim's reboot (pure over the state) and the flow's "is the problem still there" rule."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.flow.reboot_step import still_there
from bot.sim.build import build_state
from bot.sim.engine import gpu_used_mib
from bot.sim.reboot import reboot
from bot.sim.scenario import load_scenario

UNIT = "vllm-kimi-k25-int4.service"


def test_reboot_gives_a_new_boot_and_restarts_only_what_is_enabled() -> None:
    state = build_state(load_scenario("ladder"), now=1000.0)
    state["units"]["trainer.service"]["unit_file_state"] = "disabled"
    old = state["boot"]["id"]
    new = reboot(state, 2000.0)
    assert new != old and state["boot"] == {**state["boot"], "id": new, "time": 2000.0}
    prev = state["boot"]["previous"][0]
    assert prev["id"] == old and prev["end"] == 2000.0
    survivors = [p for p in state["processes"] if p["pid"] not in (1, 2)]
    assert 777 not in {p["pid"] for p in state["processes"]}
    assert survivors and all(p["start"] == 2000.0 for p in survivors)  # started at boot
    assert all(state["units"][p["owner"]["name"]]["unit_file_state"].startswith("enabled")
               for p in survivors)
    assert [gpu_used_mib(state, i) for i in range(len(state["gpus"]))] == [0, 0, 0]
    assert state["units"]["trainer.service"]["active_state"] == "inactive"


def test_an_enabled_unit_takes_its_gpus_again_after_the_reboot() -> None:
    state = build_state(load_scenario("seed"), now=1000.0)
    old_pid = state["units"][UNIT]["main_pid"]
    reboot(state, 2000.0)
    unit = state["units"][UNIT]
    assert unit["active_state"] == "active" and unit["main_pid"] not in (0, old_pid)
    assert min(gpu_used_mib(state, i) for i in range(len(state["gpus"]))) > 70_000


def test_still_there_keeps_only_the_problems_seen_before() -> None:
    before = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.1, (
        Finding("gpu.idle_vram_held", Severity.CRITICAL, "held", ""),
        Finding("gpu.units_disabled", Severity.INFO, "quiet", "")))
    fresh = Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.1, (
        Finding("gpu.idle_vram_held", Severity.CRITICAL, "8 GPUs held", ""),
        Finding("gpu.units_disabled", Severity.INFO, "quiet units", ""),
        Finding("gpu.free", Severity.INFO, "free", "")))
    assert still_there(before, fresh) == ["8 GPUs held"]
    assert still_there(before, Diagnosis("gpu-01", "vram_idle", DiagnosisStatus.OK, 0.1)) == []
    assert still_there(None, fresh) == []
