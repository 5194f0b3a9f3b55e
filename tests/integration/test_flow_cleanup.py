"""ML-aware disk cleanup through the assembled bot: a ``disk_full`` incident on a sim host
whose /data holds caches, old checkpoints, core dumps and a paused extraction's output.
The diagnosis proposes one ``disk.cleanup``; the act step runs it with the output dirs of
the host's unfinished jobs protected (read at act time), and verifies the bytes freed.

Real: redis-server, the sim host over OpenSSH sshd (files in its sandbox root, real
``find``/``rm``), the extraction queue, our service on uvicorn. Stand-in: Slack's Web API.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from bot.config.settings import Settings
from bot.domain.findings import ProposedAction
from bot.domain.lifecycle import IncidentState
from bot.jobs import queue
from bot.sim import sandbox
from bot.sim.sshd import SimHost
from storage.jobs import JobStore
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    ONCALL,
    Loop,
    buttons,
    loop,
    loop_settings,
    wait_until,
)
from tests.fixtures.extract import make_spec
from tests.fixtures.need import need

S = IncidentState
G = 1024 ** 3
PAUSED = "/data/jobs/job-paused"
PAUSED_FILES = [f"{PAUSED}/out/checkpoints/run-p/step-{i}.pt" for i in (1, 2, 3)]
OPEN = "/data/cache/huggingface/hub/models--moonshotai--Kimi-K2.5/blobs/0a0b0c"
OUTSIDE = "/shared/models/huggingface/hub/models--x--y/blobs/ffee"


def exists(sim: SimHost, path: str) -> bool:
    out = subprocess.run(sim.ssh_argv(f"test -f {path} && echo yes || echo no"),
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip() == "yes"


@pytest.fixture
def full(sim_factory: Callable[..., SimHost]) -> SimHost:
    need(sandbox.available(), "sim sandbox needs root and unshare")
    return sim_factory("disk_full_ml")


def settings(redis_url: str, sim: SimHost, lp: Loop) -> Settings:
    s = loop_settings(redis_url, sim, lp.standin, {"remediation": {"settle_s": 0.3}})
    s.hosts["gpu-01"].allowed_path_prefixes = ["/data", "/var"]
    return s


def paused_job(conn: Redis, tmp_path: Path) -> str:
    jobs = JobStore(conn)
    spec = make_spec(tmp_path, n=8, output_dir=PAUSED)
    job_id = queue.submit(jobs, spec, host="gpu-01")
    assert queue.pause(jobs, job_id).state.value == "paused"
    return job_id


def approve(lp: Loop, incident_id: str, approval_id: str) -> None:
    shown = lp.wait_text(incident_id, approval_id)
    lp.click(ONCALL, shown, lambda el: el.get("value") == approval_id
             and str(el["action_id"]).startswith("approve"))


def open_with_a_paused_job(lp: Loop, redis_url: str, redis_bytes: Redis, full: SimHost,
                           tmp_path: Path, labels: dict[str, str] | None = None) -> str:
    """A paused job's output on the full disk, the bot up, the disk_full incident awaiting
    approval: the start of every cleanup story here."""
    paused_job(redis_bytes, tmp_path)
    lp.start(settings(redis_url, full, lp))
    incident_id = lp.open("disk_full", labels)
    lp.wait_state(incident_id, S.AWAITING_APPROVAL)
    return incident_id


def used_pct(sim: SimHost, mount: str) -> int:
    out = subprocess.run(sim.ssh_argv(f"df --output=pcent {mount}"), capture_output=True,
                         text=True, timeout=30)
    return int(out.stdout.split()[-1].rstrip("%"))


def test_a_cleanup_that_leaves_data_above_its_threshold_is_never_verified(
        loop: Loop, redis_url: str, redis_bytes: Redis, full: SimHost,  # noqa: F811
        tmp_path: Path) -> None:
    """/data alerted (15 TiB full, 1.5 TiB needed under 90%): the journal on / is not
    proposed, the cleanup searched /data only, and after it /data is still 96% used, so
    the result is partial ("freed X of Y needed" and what to do next), never Verified."""
    incident_id = open_with_a_paused_job(loop, redis_url, redis_bytes, full, tmp_path,
                                         {"mountpoint": "/data"})
    plans = loop.flow.incidents.require(incident_id).parts_to_dict()["plans"]
    assert "disk.journal_vacuum" not in {p["action"]["kind"] for p in plans}
    cleanup = next(p for p in plans if p["action"]["kind"] == "disk.cleanup")
    params = cleanup["action"]["params"]
    paths = params["paths"].split("|")
    assert "/data/checkpoints/run-a/step-1000.pt" in paths
    assert all(p.startswith("/data/") for p in paths)  # not the core dump under /var (on /)
    assert not {OPEN, OUTSIDE, *PAUSED_FILES} & set(paths)
    assert (params["mount"], params["full_pct"]) == ("/data", "90")
    assert int(params["need_bytes"]) >= 1500 * G

    approve(loop, incident_id, cleanup["approval_id"])
    loop.wait_state(incident_id, S.VERIFIED, S.ACTION_FAILED, timeout_s=90)
    result = loop.flow.incidents.require(incident_id).parts_to_dict()["last_outcome"]
    assert result["outcome"] == "failed", result["summary"]
    assert "freed 757.1 GiB of 1.5 TiB needed on /data" in result["summary"]
    assert "still 96% used (threshold 90%); next: delete more under /data" in result["summary"]
    assert used_pct(full, "/data") == 96  # df rounds up, as the summary does
    assert not any(exists(full, p) for p in paths)
    assert all(exists(full, p) for p in (OPEN, OUTSIDE, *PAUSED_FILES))
    loop.wait_text(incident_id, "freed 757.1 GiB of 1.5 TiB needed")


def test_a_cleanup_offered_before_the_job_paused_is_refused_at_act_time(
        loop: Loop, redis_url: str, redis_bytes: Redis, full: SimHost,  # noqa: F811
        tmp_path: Path) -> None:
    loop.start(settings(redis_url, full, loop))
    incident_id = loop.open("disk_full")
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    params = {"paths": f"{PAUSED_FILES[0]}|/data/checkpoints/run-a/step-1000.pt",
              "need_bytes": "0"}
    stale = ProposedAction("stale-cleanup", "disk.cleanup", params, "an older preview", "-")
    plan = loop.flow.plans.offer(incident_id, stale, loop.flow.hosts.target_for("gpu-01"))
    loop.flow.publisher.publish(incident_id)
    paused_job(redis_bytes, tmp_path)  # paused after the offer: act time must see it

    approve(loop, incident_id, plan.approval_id)
    loop.wait_state(incident_id, S.ACTION_FAILED, timeout_s=60)
    result = loop.flow.incidents.require(incident_id).parts_to_dict()["last_outcome"]
    assert result["outcome"] == "refused"
    assert f"{PAUSED_FILES[0]} is in {PAUSED}" in result["summary"]
    assert all(exists(full, p) for p in PAUSED_FILES)
    assert exists(full, "/data/checkpoints/run-a/step-1000.pt")  # nothing was deleted
    loop.wait_text(incident_id, "the output of a paused or queued job")


def visible_lines(message: dict[str, Any]) -> list[str]:
    """What Slack shows: every text line of every block; an actions row counts as one."""
    lines: list[str] = []
    for block in message.get("blocks") or []:
        if block["type"] == "actions":
            lines.append(" ".join(e["text"]["text"] for e in block["elements"]))
        elif block["type"] == "context":
            lines += [e["text"] for e in block["elements"]]
        elif "text" in block:
            lines += block["text"]["text"].splitlines()
    return lines


def preview_posts(lp: Loop) -> list[str]:
    return [json.dumps(c.params) for c in lp.standin.calls_of("chat.postMessage")
            if c.params.get("thread_ts") and "Cleanup preview" in json.dumps(c.params)]


def test_the_thread_shows_the_preview_and_the_message_offers_each_part(
        loop: Loop, redis_url: str, redis_bytes: Redis, full: SimHost,  # noqa: F811
        tmp_path: Path) -> None:
    incident_id = open_with_a_paused_job(loop, redis_url, redis_bytes, full, tmp_path)
    message = loop.wait_text(incident_id, "freeing")
    posts = wait_until(lambda: preview_posts(loop), 30, "the cleanup preview in the thread")
    assert len(posts) == 1
    preview = posts[0]
    assert "300.0 GiB" in preview and "140.0 GiB" in preview and "needed" in preview
    assert "/data/checkpoints/run-a/step-1000.pt" in preview and "checkpoint" in preview
    for canary in (OPEN, OUTSIDE, *PAUSED_FILES, "/data/jobs/job-paused"):
        assert canary not in preview, canary

    lines = visible_lines(message)
    assert len(lines) <= 12, lines
    shown = "\n".join(lines)
    findings = loop.flow.incidents.require(incident_id).parts_to_dict()["diagnosis"]["findings"]
    (items,) = [f for f in findings if f["code"] == "disk.cleanup_candidates"]
    n = len(items["evidence"]["items"])
    noun = "item" if n == 1 else "items"
    assert f"Delete {n} {noun} (" in shown and "), freeing" in shown, shown
    assert "Vacuum the systemd journal down to 500M" in shown  # a phrase, not "run KIND on"
    labels = buttons(message)
    assert any(b.startswith("HF cache · ") for b in labels), labels
    assert any(b.startswith("checkpoint · ") for b in labels), labels
    assert loop.flow.incidents.require(incident_id).parts_to_dict()["results"] == []  # nothing ran


def test_approving_only_the_hf_cache_deletes_only_that_and_says_what_it_freed(
        loop: Loop, redis_url: str, redis_bytes: Redis, full: SimHost,  # noqa: F811
        tmp_path: Path) -> None:
    incident_id = open_with_a_paused_job(loop, redis_url, redis_bytes, full, tmp_path)
    plans = loop.flow.incidents.require(incident_id).parts_to_dict()["plans"]
    cleanups = [p for p in plans if p["action"]["kind"] == "disk.cleanup"]
    whole = set(cleanups[0]["action"]["params"]["paths"].split("|"))
    hf = [p for p in cleanups if p["action"]["id"].startswith("cleanup-part-")
          and "/huggingface/" in p["action"]["params"]["paths"]]
    assert len(hf) == 1
    hf_paths = hf[0]["action"]["params"]["paths"].split("|")
    others = sorted(whole - set(hf_paths))
    assert others and all("/huggingface/" in p for p in hf_paths)

    shown = loop.wait_text(incident_id, hf[0]["approval_id"])
    loop.click(ONCALL, shown, lambda el: str(el["text"]["text"]).startswith("HF cache · "))
    loop.wait_state(incident_id, S.VERIFIED, S.ACTION_FAILED, timeout_s=90)
    result = loop.flow.incidents.require(incident_id).parts_to_dict()["last_outcome"]
    assert result["outcome"] == "failed", result["summary"]  # /data is still above 90%
    assert "freed 155.0 GiB of 1.5 TiB needed on /data" in result["summary"]
    assert result["params"]["paths"] == hf[0]["action"]["params"]["paths"]
    assert result["verification"]["evidence"]["freed_bytes"] == 155 * G
    assert not any(exists(full, p) for p in hf_paths)
    assert all(exists(full, p) for p in (*others, OPEN, OUTSIDE, *PAUSED_FILES))
    loop.wait_text(incident_id, "freed")

    # the parts it left are offered again, each its own approval: now only the checkpoints
    offered = wait_until(lambda: [
        p for p in loop.flow.incidents.require(incident_id).parts_to_dict()["plans"]
        if p["action"]["id"].startswith("cleanup-part-") and "/checkpoints/" in
        p["action"]["params"]["paths"] and p["approval_id"] not in {c["approval_id"]
                                                                     for c in cleanups}],
        30, "the checkpoints offered again")
    ckpt = offered[0]["action"]["params"]["paths"].split("|")
    shown = loop.wait_text(incident_id, offered[0]["approval_id"])
    loop.click(ONCALL, shown, lambda el: el.get("value") == offered[0]["approval_id"])
    wait_until(lambda: loop.flow.incidents.require(incident_id).parts_to_dict()["last_outcome"]
               ["params"]["paths"] == offered[0]["action"]["params"]["paths"], 90,
               "the second part")
    loop.wait_state(incident_id, S.VERIFIED, S.ACTION_FAILED, timeout_s=90)
    second = loop.flow.incidents.require(incident_id).parts_to_dict()["last_outcome"]
    assert second["outcome"] == "failed", second["summary"]
    assert "freed 600.0 GiB of" in second["summary"]
    assert not any(exists(full, p) for p in ckpt)
    left = sorted(set(others) - set(ckpt))
    assert left and all(exists(full, p) for p in left)  # the core dump, pip, torch hub parts


SMALLER_DATA = [  # /data at 95% of 8 TiB: 409.6 GiB to free, the old checkpoints hold 600 GiB
    {"mount": "/", "device": "/dev/sda1", "type": "ext4", "size": "200G", "used": "190G",
     "reserved_pct": 5, "inodes": 13107200, "inodes_used": 1402113},
    {"mount": "/data", "device": "/dev/nvme1n1", "type": "ext4", "size": "8T", "used": "7782G",
     "inodes": 251658240, "inodes_used": 41702},
    {"mount": "/dev/shm", "device": "tmpfs", "type": "tmpfs", "size": "503G", "used": "181G",
     "inodes": 131911262, "inodes_used": 64},
]


def test_a_cleanup_that_brings_the_alerted_mount_under_its_threshold_is_verified(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:  # noqa: F811
    need(sandbox.available(), "sim sandbox needs root and unshare")
    sim = sim_factory("disk_full_ml", overrides={"filesystems": SMALLER_DATA})
    loop.start(settings(redis_url, sim, loop))
    incident_id = loop.open("disk_full", {"mountpoint": "/data"})
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    plans = loop.flow.incidents.require(incident_id).parts_to_dict()["plans"]
    cleanup = next(p for p in plans if p["action"]["kind"] == "disk.cleanup")
    approve(loop, incident_id, cleanup["approval_id"])
    loop.wait_state(incident_id, S.VERIFIED, S.ACTION_FAILED, timeout_s=90)
    result = loop.flow.incidents.require(incident_id).parts_to_dict()["last_outcome"]
    assert result["outcome"] == "succeeded", result["summary"]
    assert "/data now 89% used (threshold 90%)" in result["summary"]
    assert used_pct(sim, "/data") < 90


ROOT_CACHE = "/root/.cache/huggingface/hub/models--a--b/blobs/0f0f"
ON_ROOT = [{"path": ROOT_CACHE, "size": "60G", "age_days": 30},
           {"path": "/var/lib/systemd/coredump/core.python3.0.1.2.3.zst", "size": "50G",
            "age_days": 3}]


def test_one_set_of_allowed_prefixes_for_diagnosis_planning_and_action(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:  # noqa: F811
    """/root/.cache is allowed on this host: the diagnosis finds the cache on the full /,
    the planner plans it (no second, default list refuses it), the act step deletes it
    and / drops under 90%."""
    need(sandbox.available(), "sim sandbox needs root and unshare")
    sim = sim_factory("disk_full_ml", overrides={"files": ON_ROOT})
    s = settings(redis_url, sim, loop)
    s.hosts["gpu-01"].allowed_path_prefixes = ["/data", "/var", "/root/.cache"]
    loop.start(s)
    incident_id = loop.open("disk_full", {"mountpoint": "/"})
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    stored = loop.flow.incidents.require(incident_id).parts_to_dict()
    cleanup = next(p for p in stored["plans"] if p["action"]["kind"] == "disk.cleanup")
    assert cleanup["action"]["params"]["paths"] == ROOT_CACHE
    assert cleanup["action"]["params"]["mount"] == "/"
    assert not [f for f in stored["diagnosis"]["findings"] if f["code"] == "plan.not_proposed"]
    approve(loop, incident_id, cleanup["approval_id"])
    loop.wait_state(incident_id, S.VERIFIED, S.ACTION_FAILED, timeout_s=90)
    result = loop.flow.incidents.require(incident_id).parts_to_dict()["last_outcome"]
    assert result["outcome"] == "succeeded", result["summary"]
    assert not exists(sim, ROOT_CACHE) and used_pct(sim, "/") < 90
