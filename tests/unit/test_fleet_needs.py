"""Hosts ranked by what they need of a person across every cause (issue 37), and no host
left out of the digest, its chart or the Home tab without "N of M shown"."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bot.chat.blockkit import to_blocks
from bot.chat.home import render_home
from bot.digest.build import build_digest
from bot.digest.fleet_chart import MAX_ROWS, chart_rows, digest_chart
from bot.digest.heat import heat_rows
from bot.digest.model import DigestSettings
from bot.digest.render import render_digest
from bot.domain.fleet_needs import DiskFact, HostFacts, Need, days_until_full, rank_hosts
from tests.fixtures.blockkit_cases import home_fleet
from tests.fixtures.fleet_day import T0, fleet
from tests.helpers.blockkit_limits import problems, texts
from tests.helpers.charts import assert_real_picture

SHOWN = re.compile(r"(\d+) of (\d+) (?:hosts )?shown")


def test_a_disk_about_to_fill_outranks_idle_gpus_and_every_reason_is_kept() -> None:
    ranked = rank_hosts([
        HostFacts("idle", 8, idle_gpu_hours=80.0),
        HostFacts("filling", 8, disks=(DiskFact("/data", 70.0, 0.25),)),
        HostFacts("nearly", 8, disks=(DiskFact("/data", 97.0, None),)),
        HostFacts("failing", 8, incidents=3, failed=1),
        HostFacts("drained", 8, drained_h=30.0, idle_gpu_hours=2.0),
        HostFacts("fine", 8, idle_gpu_hours=0.5, disks=(DiskFact("/", 40.0, 30.0),),
                  incidents=2, drained_h=3.0),
    ])
    assert [n.host for n in ranked] == ["filling", "nearly", "failing", "drained", "idle"]
    assert [r.need for r in ranked[3].reasons] == [Need.DRAINED, Need.HELD_IDLE]


def test_days_until_full_from_growth() -> None:
    assert days_until_full([(0.0, 50.0), (86400.0, 60.0)], 100.0) == 4.0
    assert days_until_full([(0.0, 50.0), (86400.0, 40.0)], 100.0) is None
    assert days_until_full([(0.0, 50.0)], 100.0) is None


def _accounted(words: str, hosts: list[str], say_cut: bool) -> None:
    named = {h for h in hosts if re.search(rf"(?<![\w-]){re.escape(h)}(?![\w-])", words)}
    cuts = SHOWN.findall(words)
    assert named == set(hosts) or (say_cut and cuts), \
        f"{len(hosts) - len(named)} hosts neither named nor under an 'N of M shown'"


def test_the_400_host_digest_names_every_host_in_need_or_says_how_many_it_shows() -> None:
    series, incidents, drained = fleet(400)
    digest = build_digest(T0, T0 + 86400, series, incidents, drained=drained)
    message = render_digest(digest)
    blocks = to_blocks(message)
    assert problems(blocks) == []
    words = "\n".join(texts(blocks))
    needing = [n.host for n in digest.needs]
    assert len(needing) > 50  # the fleet is built so that many hosts need a person
    _accounted(words, needing, say_cut=True)
    assert "10 of 400 hosts shown" in words  # the detail sections are cut and say so


def test_the_fleet_chart_says_how_many_rows_it_shows() -> None:
    series, incidents, drained = fleet(400, step=3600)
    digest = build_digest(T0, T0 + 86400, series, incidents, drained=drained)
    rows, title = chart_rows(digest)
    assert len(rows) == MAX_ROWS and title == f"{MAX_ROWS} of 400 hosts shown"
    assert [r for r in rows[:len(digest.needs)]] == [n.host for n in digest.needs][:MAX_ROWS]
    small = build_digest(T0, T0 + 86400, dict(list(series.items())[:40]))
    assert chart_rows(small)[1] == "40 of 40 hosts shown"


def test_the_400_host_home_fits_and_leaves_no_host_unaccounted() -> None:
    view = render_home(home_fleet(400))
    assert problems(view["blocks"], "home") == []
    words = "\n".join(texts(view["blocks"]))
    summary = view["blocks"][1]["text"]["text"]
    needs = int(re.search(r"\*(\d+) need a person\*", summary).group(1))  # type: ignore[union-attr]
    assert needs > 50
    ranked = [m for m in re.findall(r"^\d+\. \*([^*]+)\*", words, re.M)]
    assert len(ranked) == needs or re.search(rf"(\d+) of {needs} shown", words)
    assert "25 of 400 shown" in words  # the host list
    assert json.dumps(view).count('"type": "header"') == 5


def test_the_fleet_chart_draws_its_heatmaps(tmp_path: Path) -> None:
    series, incidents, drained = fleet(40, step=1800)
    digest = build_digest(T0, T0 + 86400, series, incidents, drained=drained)
    path = digest_chart(digest, series, tmp_path / "fleet.png")
    img = assert_real_picture(path.read_bytes())
    red = (img[..., 0] > 200) & (img[..., 1] < 80) & (img[..., 2] < 80)
    assert red.sum() > 2000  # hours of VRAM held idle drawn as full-red cells


def test_an_hours_idle_share_is_the_same_at_any_sampling_step() -> None:
    """Four hours held idle read 100 % in each of them whether sampled every minute or
    every 30 (a line chart's bands turn to stripes there); hours no sample covers are
    None, never 0."""
    def host(step: float) -> dict[str, list[tuple[float, float]]]:
        times = [T0 + k * step for k in range(int(12 * 3600 / step) + 1)]
        util = [(t, 0.0 if 2 * 3600 <= t - T0 < 6 * 3600 else 90.0) for t in times]
        return {"gpu0.mem_used_mib": [(t, 70_000.0) for t in times], "gpu0.util_pct": util}

    for step in (60.0, 1800.0):
        row = heat_rows({"h": host(step)}, ["h"], DigestSettings(), T0, T0 + 86400)[0]
        assert row.idle[2:6] == (1.0, 1.0, 1.0, 1.0), (step, row.idle[:8])
        assert row.idle[0] == 0.0 and row.idle[7] == 0.0
        assert all(v is None for v in row.idle[13:]), "no samples after noon"
