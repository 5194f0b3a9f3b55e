"""The App Home renderer and GPU classification on known snapshots."""

from __future__ import annotations

import json

from bot.chat.home import (
    Fleet,
    HostGpus,
    IncidentRow,
    JobRow,
    classify_gpus,
    host_line,
    render_home,
)
from bot.core import strings
from bot.domain.maintenance import MaintenanceWindow
from bot.domain.slurm import DrainedNode
from bot.domain.windows import parse_window

NOW = 1_764_590_400.0  # 12:00 UTC


def test_classify_gpus_from_latest_samples() -> None:
    latest = {"gpu0.mem_used_mib": 77_600, "gpu0.util_pct": 0,  # held idle
              "gpu1.mem_used_mib": 70_000, "gpu1.util_pct": 93,  # busy
              "gpu2.mem_used_mib": 3, "gpu2.util_pct": 0,  # free
              "gpu3.mem_used_mib": 500,  # no utilisation reading: broken
              "disk:/data.used_bytes": 1e12}
    assert classify_gpus("gpu-01", latest, expected=6) == HostGpus("gpu-01", 1, 1, 1, 3)
    assert classify_gpus("gpu-02", {}, expected=0) == HostGpus("gpu-02")
    unknown = classify_gpus("gpu-03", {}, expected=8)  # no sample yet: unknown, not broken
    assert unknown == HostGpus("gpu-03", unsampled=8)
    assert host_line(unknown) == "*gpu-03* · 8 GPUs expected: no sample yet"


def test_render_home_lists_the_fleet_incidents_and_jobs() -> None:
    fleet = Fleet(
        now=NOW,
        hosts=(HostGpus("gpu-02", busy=8), HostGpus("gpu-01", held_idle=8)),
        incidents=(IncidentRow("INC-2", "gpu-02", "disk_full", "resumed", NOW - 7800),
                   IncidentRow("INC-1", "gpu-01", "vram_idle", "awaiting_approval", NOW - 240)),
        jobs=(JobRow("kimi-hidden", "gpu-02", 18_283, 37_312, 1.09),),
    )
    view = render_home(fleet)
    assert view["type"] == "home"
    texts = [b["text"]["text"] for b in view["blocks"] if b["type"] in ("header", "section")]
    assert texts == [
        "Fleet",
        "*2 hosts* · 16 GPUs: 8 busy · 8 held idle · 0 free · 0 broken · *1 need a person* · "
        "2 incidents open · 0 nodes drained",
        "*Needs a person* · 1 of 2 hosts, most urgent first\n"
        "1. *gpu-01* · 8 GPUs holding VRAM idle now",
        "Hosts",
        ":red_circle: *gpu-01* · 8 GPUs: 0 busy · 8 held idle · 0 free · 0 broken\n"
        "*gpu-02* · 8 GPUs: 8 busy · 0 held idle · 0 free · 0 broken",
        "Open incidents",
        ":arrow_forward: *INC-2* gpu-02 · disk_full · resumed · open 2 h 10 min\n"
        ":raising_hand: *INC-1* gpu-01 · vram_idle · awaiting approval · open 4 min",
        "Running extractions",
        "*kimi-hidden* on gpu-02 · ▓▓▓▓▓░░░░░ 49.0% · 18,283/37,312 · 1.09 samples/s",
    ]
    assert view["blocks"][-1]["elements"][0]["text"] == "Updated 12:00 UTC"


def test_empty_fleet_says_so() -> None:
    texts = [b["text"]["text"] for b in render_home(Fleet(NOW))["blocks"]
             if b["type"] == "section"]
    assert texts == ["*0 hosts* · 0 GPUs: 0 busy · 0 held idle · 0 free · 0 broken · "
                     "*0 need a person* · 0 incidents open · 0 nodes drained",
                     strings.NEEDS_NONE,
                     "_No host samples yet (is the sampler or agent running?)_",
                     "_Nothing open._", "_No extraction is running._"]


def test_maintenance_windows_show_only_when_configured() -> None:
    sat_3am = 1_784_343_600.0  # 2026-07-18 03:00 UTC, a Saturday
    windows = (MaintenanceWindow("gpu-0*", (), parse_window("Sat 02:00-04:00 UTC"), "firmware"),
               MaintenanceWindow("*", ("disk_full",), parse_window("Sun 01:00-02:00 UTC")))
    text = json.dumps(render_home(Fleet(sat_3am, maintenance=windows)), ensure_ascii=False)
    assert "Maintenance windows (alerts recorded, not posted)" in text
    assert ":construction: now: `gpu-0*`: Sat 02:00-04:00 UTC — firmware" in text
    assert "`*` (disk_full): Sun 01:00-02:00 UTC" in text
    assert "Maintenance" not in json.dumps(render_home(Fleet(sat_3am)))


def test_drained_slurm_nodes_show_with_reason_who_and_how_long() -> None:
    nodes = (DrainedNode("gpu-01", "DRAINED", "root", "incident-bot INC-7: GPU 3 <broken>",
                         NOW - 2 * 3600, by_bot=True, incident="INC-7"),
             DrainedNode("gpu-02", "DRAINING", "alice", "bad fan", None))
    text = json.dumps(render_home(Fleet(NOW, drained=nodes)), ensure_ascii=False)
    assert "Drained Slurm nodes" in text
    assert "gpu-01 DRAINED for 2 h, by root: incident-bot INC-7: GPU 3 &lt;broken&gt;" in text
    assert "gpu-02 DRAINING for an unknown time, by alice: bad fan" in text
    assert "Drained Slurm" not in json.dumps(render_home(Fleet(NOW)))  # none: no section
