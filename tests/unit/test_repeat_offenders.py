"""Repeat offenders (bot/domain/repeat.py), pure: which findings are a part's fault, and
the same fault again within the window after a passed gate."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.repeat import WEEK_S, FaultSeen, GatePass, fault_key, faults_of, offence

DAY = 86400.0
T0 = 1_700_000_000.0
KEY = "gpu.broken:0000:5d:00"


def gpu_finding(code: str, bus: str = "0000:5d:00",
                severity: Severity = Severity.CRITICAL) -> Finding:
    return Finding(code, severity, f"GPU 3 {code}", evidence={"gpu": {
        "index": 3, "bus": bus, "reasons": ["Xid 79 since boot: GPU has fallen off the bus"]}})


def test_only_hardware_faults_have_keys() -> None:
    assert fault_key(gpu_finding("gpu.broken")) == KEY
    assert fault_key(gpu_finding("gpu.hot", severity=Severity.WARNING)) is None
    assert fault_key(Finding("gpu.fabric_manager", Severity.CRITICAL, "fm")) is None
    port = Finding("ib.port_down", Severity.CRITICAL, "down", evidence={
        "port": {"ca": "mlx5_1", "port": 1}})
    assert fault_key(port) == "ib.port_down:mlx5_1/1"
    assert fault_key(Finding("gpu.missing", Severity.CRITICAL, "1 of 8")) == "gpu.missing:host"
    d = Diagnosis("gpu-04", "gpu_health", DiagnosisStatus.OK, 0.1,
                  (gpu_finding("gpu.broken"), gpu_finding("gpu.broken"), port))
    assert faults_of(d) == {KEY: "GPU 3 (5D:00.0) fell off the bus (Xid 79)",
                            "ib.port_down:mlx5_1/1": "down"}


def test_the_same_fault_after_a_passed_gate_within_the_window() -> None:
    history = [FaultSeen(KEY, T0, "INC-1", "fell off the bus")]
    passes = [GatePass(T0 + 3600, "INC-1", 3)]
    hit = offence("gpu-04", {KEY: "GPU 3 fell off"}, history, passes, T0 + 2 * DAY, "INC-9")
    assert hit is not None
    assert (hit.key, hit.first_at, hit.passed_at, hit.before, hit.now) == (
        KEY, T0, T0 + 3600, "INC-1", "INC-9")


def test_no_offence_outside_the_window_without_a_pass_or_for_another_fault() -> None:
    history = [FaultSeen(KEY, T0, "INC-1")]
    passes = [GatePass(T0 + 3600, "INC-1")]
    late = T0 + 3600 + WEEK_S + 1
    assert offence("gpu-04", {KEY: ""}, history, passes, late, "INC-9") is None
    assert offence("gpu-04", {KEY: ""}, history, [], T0 + DAY, "INC-9") is None
    other = "gpu.broken:0000:18:00"
    assert offence("gpu-04", {other: ""}, history, passes, T0 + DAY, "INC-9") is None
    # seen only after the pass: the gate never vouched for a repair of it
    assert offence("gpu-04", {KEY: ""}, [FaultSeen(KEY, T0 + 7200)], passes, T0 + DAY,
                   "INC-9") is None
    assert offence("gpu-04", {KEY: ""}, history, passes, T0 + DAY, "INC-9",
                   window_s=DAY / 2) is None
