"""storage/health_history.py on the real redis-server: faults and passes kept per node in
time order and trimmed, the smoke baseline, the RMA list."""

from __future__ import annotations

from redis import Redis

from bot.domain.repeat import FaultSeen, GatePass, RepeatOffence
from storage.health_history import HealthHistory

T0 = 1_700_000_000.0


def test_faults_passes_baseline_and_rma(redis: Redis) -> None:
    now = [T0]
    h = HealthHistory(redis, keep_s=10 * 86400, clock=lambda: now[0])
    h.record_faults("gpu-04", [FaultSeen("gpu.broken:0000:5d:00", T0 - 20 * 86400, "INC-0"),
                               FaultSeen("gpu.broken:0000:5d:00", T0 - 60, "INC-1", "lost")])
    h.record_pass("gpu-04", GatePass(T0 - 30, "INC-1", 3))
    assert [(f.incident, f.title) for f in h.faults("gpu-04")] == [("INC-1", "lost")]  # trimmed
    assert h.passes("gpu-04") == [GatePass(T0 - 30, "INC-1", 3)]
    assert h.faults("gpu-05") == [] and h.passes("gpu-05") == []
    h.set_smoke_baseline("gpu-04", {"GPU-a": {"matmul_tflops": 600.0}})
    h.set_smoke_baseline("gpu-04", {"GPU-b": {"matmul_tflops": 590.0}})
    assert h.smoke_baseline("gpu-04") == {"GPU-a": {"matmul_tflops": 600.0},
                                          "GPU-b": {"matmul_tflops": 590.0}}
    offence = RepeatOffence("gpu-04", "gpu.broken:0000:5d:00", "lost", T0 - 60, T0 - 30, T0,
                            "INC-1", "INC-2")
    h.send_to_rma(offence)
    assert h.rma() == [offence]
    h.returned("gpu-04")
    assert h.rma() == []
