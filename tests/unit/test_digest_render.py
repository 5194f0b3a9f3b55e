"""The digest as a chat message: what a morning reader sees, and hostile names escaped."""

from __future__ import annotations

from bot.chat.base import ChatMessage
from bot.digest.build import build_digest
from bot.digest.model import ActionRecord, DigestSettings, IncidentRecord, JobRecord
from bot.digest.render import (
    MAX_HOST_SECTIONS,
    fmt_gpu_minutes,
    fmt_mib,
    render_digest,
)
from tests.fixtures.samples import DAY0, story_series

END = DAY0 + 86400


def story_message() -> ChatMessage:
    incs = [
        IncidentRecord(
            "7",
            "gpu-01",
            "vram_idle",
            "critical",
            "resolved",
            DAY0 + 14.2 * 3600,
            DAY0 + 14.5 * 3600,
        )
    ]
    acts = [ActionRecord("7", "systemd.stop_disable", "verified", DAY0 + 14.4 * 3600)]
    jobs = [JobRecord("extract-kimi", "gpu-01", "running", 18_283, 37_312, 1.09)]
    return render_digest(build_digest(DAY0, END, story_series(), incs, acts, jobs))


def test_formatters() -> None:
    assert fmt_mib(77_600) == "75.8 GiB" and fmt_mib(0.5) == "512.0 KiB"
    assert fmt_gpu_minutes(30) == "30 GPU-min"
    assert fmt_gpu_minutes(600) == "10.0 GPU-hours"


def test_story_digest_message() -> None:
    msg = story_message()
    assert msg.header is not None and msg.header.startswith("Health digest · 2024-05-01 00:00")
    summary, needs, first, second, jobs = msg.sections
    assert "12 GPUs" in summary.text and "78.7 GPU-hours" in summary.text
    # ranked by what they need of a person (issue 37): gpu-01's disk fills in hours and
    # it held 8 GPUs idle; gpu-02 needs nothing
    assert needs.text.splitlines() == [
        "*Needs a person* · 1 of 2 hosts, most urgent first",
        "1. *gpu-01* · /data full in 4 h 48 min (92% used) · VRAM held idle 78.7 GPU-h"]
    assert "Incidents: 1 opened · 1 resolved · 0 still open" in summary.fields
    assert "Time to resolve: median 18 min · worst 18 min" in summary.fields
    assert "Actions: systemd.stop_disable verified ×1" in summary.fields
    assert first.text.startswith("*gpu-01* · 8 GPUs · :red_circle: VRAM held idle 78.7 GPU-hours")
    assert ":red_circle:" not in second.text
    assert any(f.startswith("Disk /data: 92% used") and "full in 4 h 48 min" in f
               for f in first.fields)
    assert any("GPU utilisation min/avg/max: 0% /" in f for f in first.fields)
    assert jobs.code is not None and "18283/37312 49%" in jobs.code and "1.09" in jobs.code
    assert "78.7 GPU-hours" in msg.text


def test_hostile_names_are_escaped() -> None:
    hostile = "<!channel>"
    d = build_digest(
        DAY0,
        END,
        {hostile: {"gpu0.util_pct": [(DAY0, 1.0)]}},
        actions=[ActionRecord("1", "<!here>", "ok", DAY0)],
        jobs=[JobRecord("```", "h", "running", 1, 2)],
    )
    msg = render_digest(d)
    blob = " ".join(
        [
            msg.text,
            *(s.text for s in msg.sections),
            *(f for s in msg.sections for f in s.fields),
            *(s.code or "" for s in msg.sections),
        ]
    )
    assert "<!channel>" not in blob and "<!here>" not in blob
    assert "&lt;!channel&gt;" in blob
    assert "```" not in blob


def test_many_hosts_are_capped_and_no_samples_is_said() -> None:
    many = {f"h{i:02d}": {"gpu0.util_pct": [(DAY0, 50.0)]} for i in range(MAX_HOST_SECTIONS + 5)}
    msg = render_digest(build_digest(DAY0, END, many, cfg=DigestSettings()))
    assert len(msg.sections) == 1 + 1 + MAX_HOST_SECTIONS + 1  # summary, needs, hosts, cut
    assert msg.sections[1].text.startswith("No host needs a person")
    assert msg.sections[-1].text == f"{MAX_HOST_SECTIONS} of 15 hosts shown, most in need first"
    empty = render_digest(build_digest(DAY0, END, {}))
    assert "No host samples" in empty.sections[-1].text
    assert all(len(s.fields) <= 10 for s in msg.sections)  # Slack's limit per section


def test_drained_slurm_nodes_are_listed_with_who_why_and_how_long() -> None:
    from bot.domain.slurm import DrainedNode

    nodes = [DrainedNode("gpu-01", "DRAINED", "root", "incident-bot INC-7: GPU 3 <!here>",
                         END - 3 * 3600, by_bot=True, incident="INC-7")]
    msg = render_digest(build_digest(DAY0, END, story_series(), drained=nodes))
    line = next(f for f in msg.sections[0].fields if f.startswith("Drained Slurm nodes"))
    assert line == ("Drained Slurm nodes: gpu-01 DRAINED 3 h "
                    "(root: incident-bot INC-7: GPU 3 &lt;!here&gt;)")
    plain = render_digest(build_digest(DAY0, END, story_series()))
    assert not any("Drained" in f for f in plain.sections[0].fields)  # none: no line
