"""Maintenance windows, pure: which alerts they cover, their JSON, and the planner's
"recorded, not posted" for an alert inside one."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.domain.incident import Alert
from bot.domain.maintenance import (
    MaintenanceWindow,
    in_window,
    windows_from_json,
    windows_to_json,
)
from bot.domain.planner import Planner, PlanOutcome, View
from bot.domain.windows import parse_window

SAT_3AM = datetime(2026, 7, 18, 3, 0, tzinfo=UTC).timestamp()
SAT_5AM = datetime(2026, 7, 18, 5, 0, tzinfo=UTC).timestamp()
FIRMWARE = MaintenanceWindow("gpu-0*", (), parse_window("Sat 02:00-04:00 UTC"), "firmware")
DISKS = MaintenanceWindow("*", ("disk_full",), parse_window("daily 00:00-01:00 UTC"))


def test_in_window_by_host_glob_kind_and_time() -> None:
    assert in_window([DISKS, FIRMWARE], "gpu-01", "vram_idle", SAT_3AM) is FIRMWARE
    assert in_window([FIRMWARE], "gpu-11", "vram_idle", SAT_3AM) is None  # glob
    assert in_window([FIRMWARE], "gpu-01", "vram_idle", SAT_5AM) is None  # time
    assert in_window([DISKS], "gpu-01", "vram_idle", SAT_3AM - 3 * 3600) is None  # kind
    assert in_window([DISKS], "cpu-9", "disk_full", SAT_3AM - 3 * 3600) is DISKS


def test_json_round_trip_skips_what_no_longer_parses() -> None:
    text = windows_to_json([FIRMWARE, DISKS])
    assert windows_from_json(text) == (FIRMWARE, DISKS)
    broken = text.replace("Sat 02:00-04:00 UTC", "Sat 02:00-04:00 Gone/Zone")
    assert windows_from_json(broken) == (DISKS,)
    assert windows_from_json(None) == () and windows_from_json("") == ()


def test_planner_records_an_alert_inside_a_window_and_posts_nothing() -> None:
    alert = Alert("agent", "gpu-01", "vram_idle", summary="8 GPUs held idle")
    plan = Planner(View(maintenance=(FIRMWARE,)), SAT_3AM, 0, iter(["INC-1"])).run([alert])
    assert plan.outcomes == [(PlanOutcome.SILENCED, None)]
    assert not plan.incidents and not plan.events and not plan.seen
    (note,) = plan.notes
    assert note.action == "alert.suppressed" and note.incident_id == ""
    assert note.detail["window"] == "Sat 02:00-04:00 UTC" and note.detail["reason"] == "firmware"
    later = Planner(View(maintenance=(FIRMWARE,)), SAT_5AM, 0, iter(["INC-1"])).run([alert])
    assert later.outcomes == [(PlanOutcome.CREATED, "INC-1")]
