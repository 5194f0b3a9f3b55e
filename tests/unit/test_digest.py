"""The digest's figures on hand-made samples: idle VRAM minutes, disk ETA, incidents."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.digest.build import build_digest
from bot.digest.model import (
    ActionRecord,
    DigestSettings,
    IncidentRecord,
    Stat,
    disk_stats,
    idle_minutes,
    incident_stats,
    slope_per_s,
    split_metrics,
)
from tests.fixtures.samples import DAY0, GIB, story_series

CFG = DigestSettings()
T0 = 1_000_000.0


def series(values: list[float], step: float = 60.0, t0: float = T0) -> list[tuple[float, float]]:
    return [(t0 + i * step, v) for i, v in enumerate(values)]


def test_stat_of_values_and_empty() -> None:
    assert Stat.of([]) is None
    assert Stat.of([1.0, 2.0, 6.0]) == Stat(1.0, 3.0, 6.0)


def test_held_vram_at_zero_util_counts_every_interval() -> None:
    mem = series([2000.0] * 11)  # ten one-minute intervals
    assert idle_minutes(mem, series([0.0] * 11), CFG, T0, T0 + 3600) == pytest.approx(10.0)


def test_busy_or_small_or_unknown_util_is_not_idle() -> None:
    mem = series([2000.0] * 11)
    assert idle_minutes(mem, series([50.0] * 11), CFG, T0, T0 + 3600) == 0.0
    assert idle_minutes(series([100.0] * 11), series([0.0] * 11), CFG, T0, T0 + 3600) == 0.0
    assert idle_minutes(mem, [], CFG, T0, T0 + 3600) == 0.0


def test_idle_is_clipped_to_period_and_capped_per_gap() -> None:
    mem = series([2000.0] * 11)
    util = series([0.0] * 11)
    # the period starts half-way: five minutes remain
    assert idle_minutes(mem, util, CFG, T0 + 300, T0 + 3600) == pytest.approx(5.0)
    # a 2-hour hole between two samples counts only max_gap_s (10 minutes)
    gap = [(T0, 2000.0), (T0 + 7200, 2000.0)]
    assert idle_minutes(gap, [(T0, 0.0)], CFG, T0, T0 + 9000) == pytest.approx(10.0)


def test_util_is_matched_to_nearest_sample() -> None:
    mem = series([2000.0] * 3)
    util = [(T0 + 5, 0.0), (T0 + 61, 90.0), (T0 + 125, 0.0)]
    assert idle_minutes(mem, util, CFG, T0, T0 + 600) == pytest.approx(1.0)


def test_disk_days_until_full_from_linear_growth() -> None:
    used = series([(400 + 100 * d) * GIB for d in range(2)], step=86400.0)
    d = disk_stats("/data", {"used_bytes": used, "size_bytes": [(T0, 1000 * GIB)]})
    assert d is not None
    assert d.growth_bytes_per_day == pytest.approx(100 * GIB)
    assert d.days_until_full == pytest.approx(5.0)
    assert d.used_pct == pytest.approx(50.0)


def test_shrinking_or_single_sample_disk_has_no_eta() -> None:
    shrinking = series([900 * GIB, 800 * GIB], step=3600)
    d = disk_stats("/data", {"used_bytes": shrinking, "size_bytes": [(T0, 1000 * GIB)]})
    assert d is not None and d.days_until_full is None and d.growth_bytes_per_day is not None
    one = disk_stats("/data", {"used_bytes": [(T0, 1.0)]})
    assert one is not None and one.growth_bytes_per_day is None and one.used_pct is None
    assert disk_stats("/data", {}) is None
    assert slope_per_s([(T0, 1.0), (T0, 2.0)]) is None


def test_split_metrics_ignores_unknown_names() -> None:
    gpus, disks = split_metrics(
        {
            "gpu3.util_pct": [(1, 2)],
            "disk:/data.v2.used_bytes": [(1, 5)],
            "load1": [(1, 1)],
            "gpu1.temperature": [(1, 1)],
        }
    )
    assert list(gpus) == [3] and list(disks) == ["/data.v2"]


def test_incident_stats_period_and_time_to_resolve() -> None:
    incs = [
        IncidentRecord("1", "h", "vram_idle", "critical", "resolved", T0 + 10, T0 + 610),
        IncidentRecord("2", "h", "vram_idle", "critical", "resolved", T0 + 20, T0 + 1820),
        IncidentRecord("3", "h", "disk_full", "warning", "awaiting_approval", T0 + 30),
        IncidentRecord("4", "h", "disk_full", "warning", "resolved", T0 - 9000, T0 - 8000),
    ]
    s = incident_stats(incs, T0, T0 + 3600)
    assert (s.opened, s.resolved, s.still_open) == (3, 2, 1)
    assert s.ttr_median_s == pytest.approx(1200.0) and s.ttr_max_s == pytest.approx(1800.0)
    assert s.opened_by_kind == {"vram_idle": 2, "disk_full": 1}


def test_story_day_ranks_the_wasting_host_first() -> None:
    data = story_series()
    acts = [
        ActionRecord("1", "systemd.stop_disable", "verified", DAY0 + 15 * 3600),
        ActionRecord("1", "systemd.stop_disable", "verified", DAY0 - 10),
    ]
    d = build_digest(DAY0, DAY0 + 86400, data, actions=acts)
    assert [h.host for h in d.hosts] == ["gpu-01", "gpu-02"]
    gpu01 = d.hosts[0]
    # 8 GPUs held from the first sample at/after hour 14.1 (14h10m) to midnight: 9h50m each
    assert gpu01.idle_gpu_minutes == pytest.approx(8 * 590.0)
    assert d.hosts[1].idle_gpu_minutes == 0.0
    assert d.actions == {("systemd.stop_disable", "verified"): 1}
    mem = gpu01.gpu_stat("mem_used_mib")
    assert mem is not None and mem.min == 0.0 and mem.max == pytest.approx(75.8e6 / 1024)
    disk = gpu01.disks[0]
    assert disk.days_until_full is not None and 0.1 < disk.days_until_full < 0.3


def test_bad_period_and_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="end > start"):
        build_digest(T0, T0, {})
    with pytest.raises(ValidationError):
        DigestSettings(idle_util_pct=150)
    with pytest.raises(ValidationError):
        DigestSettings.model_validate({"schedules": [{"cron": "0 8 * * *", "bogus": 1}]})
