"""Wasted GPU-hours per host and per unit, incidents and time to resolve, on a known
history with exact figures; the chart gains a row of bars for it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bot.digest.build import build_digest
from bot.digest.charts import render_chart
from bot.digest.model import IncidentRecord
from bot.digest.render import render_digest
from bot.digest.waste import attribute, holder_unit
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity

VLLM, SGLANG = "vllm-kimi-k25-int4.service", "sglang.service"
TICKS = range(0, 3601, 60)  # one sample a minute for an hour


def idle_gpu(i: int) -> dict[str, list[tuple[float, float]]]:
    return {f"gpu{i}.mem_used_mib": [(t, 77_600.0) for t in TICKS],
            f"gpu{i}.util_pct": [(t, 0.0) for t in TICKS],
            f"gpu{i}.mem_total_mib": [(t, 97_887.0) for t in TICKS]}


SERIES = {
    "gpu-01": {**idle_gpu(0), **idle_gpu(1)},  # 2 GPUs idle all hour: 2.0 GPU-h
    "gpu-02": {"gpu0.mem_used_mib": [(t, 60_000.0) for t in TICKS],  # idle the first half
               "gpu0.util_pct": [(t, 0.0 if t < 1800 else 90.0) for t in TICKS]},
}
INCIDENTS = [
    IncidentRecord("INC-1", "gpu-01", "vram_idle", "critical", "resolved", 600, 2400, VLLM),
    IncidentRecord("INC-2", "gpu-01", "vram_idle", "critical", "resolved", 2000, 3000, SGLANG),
    IncidentRecord("INC-3", "gpu-02", "disk_full", "warning", "open", 100),
]


def test_wasted_gpu_hours_per_host_and_unit_are_exact() -> None:
    d = build_digest(0, 3600, SERIES, INCIDENTS)
    assert d.waste.by_host == pytest.approx({"gpu-01": 2.0, "gpu-02": 0.5})
    # per GPU: VLLM holds 600–2400, SGLANG the rest of its window 2400–3000, the others
    # (0–600, 3000–3600, and all of gpu-02's idle half hour) no incident explains
    assert d.waste.by_unit == pytest.approx({VLLM: 1.0, SGLANG: 1 / 3,
                                             "unattributed": 2 / 3 + 0.5})
    assert d.waste.total == pytest.approx(d.idle_gpu_minutes / 60) == pytest.approx(2.5)
    assert (d.incidents.opened, d.incidents.resolved, d.incidents.still_open) == (3, 2, 1)
    assert (d.incidents.ttr_median_s, d.incidents.ttr_max_s) == (1400, 1800)


def test_digest_message_says_it_in_gpu_hours_and_durations() -> None:
    fields = render_digest(build_digest(0, 3600, SERIES, INCIDENTS)).sections[0].fields
    assert fields[:4] == (
        "Incidents: 3 opened · 2 resolved · 1 still open",
        "Time to resolve: median 23 min · worst 30 min",
        "GPU-hours wasted (VRAM held at ≤5% utilisation): *2.5 GPU-h* · by host: "
        "gpu-01 2.0 GPU-h, gpu-02 0.5 GPU-h",
        f"Wasted by unit: unattributed 1.2 GPU-h, {VLLM} 1.0 GPU-h, {SGLANG} 0.3 GPU-h",
    )


def test_no_waste_no_lines_and_nothing_counted_twice() -> None:
    quiet = {"gpu-03": {"gpu0.mem_used_mib": [(t, 10.0) for t in TICKS],
                        "gpu0.util_pct": [(t, 0.0) for t in TICKS]}}
    d = build_digest(0, 3600, quiet, [])
    assert d.waste.total == 0 and not any("wasted" in f for f in render_digest(d).sections[0]
                                          .fields)
    both = attribute([(0.0, 100.0)], [("a", (0.0, 100.0)), ("b", (0.0, 100.0))])
    assert both == {"a": 100.0}


def test_chart_has_the_wasted_gpu_hours_row(tmp_path: Path) -> None:
    d = build_digest(0, 3600, SERIES, INCIDENTS)
    path = render_chart(d, SERIES, tmp_path / "digest.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    from PIL import Image

    with Image.open(path) as img:  # three rows: two hosts, then the waste bars
        assert img.size[1] == round((2.8 * 3 + 0.8) * 100)


def test_holder_unit_from_a_stored_diagnosis() -> None:
    diagnosis = Diagnosis("h", "vram_idle", DiagnosisStatus.OK, 0.1, (
        Finding("gpu.units_disabled", Severity.INFO, "t", "d", {}),
        Finding("gpu.idle_vram_held", Severity.CRITICAL, "t", "d",
                {"restarter": {"name": VLLM}})))
    assert holder_unit(diagnosis) == VLLM
    assert holder_unit(None) == ""
    assert holder_unit(replace(diagnosis, findings=diagnosis.findings[:1])) == ""
