"""`/ir` through the assembled service: signed slash commands answered from Redis and hosts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis import Redis

from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost
from tests.fixtures.slack import served_bot

SECRET, TOKEN, CHANNEL, USER = "slash-secret", "xoxb-slash", "C0INCIDENT", "UALICE"


@pytest.fixture
def bot(redis: Redis, redis_url: str, sim_factory: Callable[..., SimHost]) -> Iterator[Any]:
    with served_bot(redis_url, sim_factory("seed"), SECRET, TOKEN, CHANNEL, USER) as served:
        yield served


def replies(standin: SlackStandIn, n: int) -> list[str]:
    return [str(c.params.get("text", "")) for c in standin.wait_for("response_url", n, 30)]


def test_diag_opens_an_incident_and_posts_its_findings(bot: Any) -> None:
    service, standin, sender = bot
    assert sender.slash(USER, "/ir", "diag gpu-01 vram_idle").status_code == 200
    assert "opened INC-" in replies(standin, 1)[0]
    post = standin.wait_for("chat.postMessage", 1, 30)[0]
    assert "gpu-01" in str(post.params.get("text"))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # the diagnosis is stored right after the post
        [incident] = service.flow.incidents.list(open_only=True)
        if incident.diagnosis is not None:
            break
        time.sleep(0.1)
    assert incident.kind == "vram_idle" and incident.parts_to_dict()["diagnosis"]["findings"]


def test_unknown_host_and_status(bot: Any) -> None:
    _, standin, sender = bot
    sender.slash(USER, "/ir", "diag gpu-99")
    sender.slash(USER, "/ir", "status")
    texts = replies(standin, 2)
    assert any("`gpu-99` is not in the inventory" in t for t in texts)
    assert any(t.startswith("*gpu-01*") and "incidents: none open" in t for t in texts)


def test_status_of_a_host_shows_its_gpus_and_disks(bot: Any) -> None:
    """What `/ir help` promises: GPU memory and utilization (one line for GPUs that read
    the same), each real disk as "N% full: X free of Y", the open incidents."""
    _, standin, sender = bot
    sender.slash(USER, "/ir", "status gpu-01")
    (text,) = replies(standin, 1)
    lines = text.splitlines()
    assert lines[0] == "*gpu-01*"
    assert lines[1] == "GPUs 0–7: 75.8 of 95.6 GiB used, 0% busy"
    assert lines[2].startswith("disks: / 22% full: ") and "free of 200.0 GiB" in lines[2]
    assert "/data 19% full: 12.1 TiB free of 15.0 TiB" in lines[2]
    assert "tmpfs" not in text and "/dev/shm" not in text and "MiB" not in text
    assert lines[3] == "incidents: none open"
    sender.slash(USER, "/ir", "status gpu-99")
    assert "`gpu-99` is not in the inventory" in replies(standin, 2)[1]


def test_diag_runs_the_playbook_the_host_calls_for_and_names_who_asked(bot: Any) -> None:
    service, standin, sender = bot
    sender.slash(USER, "/ir", "diag gpu-01")
    incident = diagnosed(service)
    assert incident.kind == "auto"
    card = standin.wait_for("chat.postMessage", 1, 30)[0]  # the alert card, before findings
    assert f"/ir diag by <@{USER}>" in str(card.params.get("blocks"))
    assert "&lt;@" not in str(card.params)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and \
            (found := service.flow.incidents.require(incident.id)).diagnosis is None:
        time.sleep(0.1)
    assert found.diagnosis is not None and found.diagnosis.playbook == "vm_restart"


def test_digest_now_posts_a_digest_with_its_chart(bot: Any) -> None:
    _, standin, sender = bot
    sender.slash(USER, "/ir", "digest now")
    assert "Posting the digest now" in replies(standin, 1)[0]
    standin.wait_for("chat.postMessage", 1, 60)
    standin.wait_for("files.completeUploadExternal", 1, 60)


def diagnosed(service: Any) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the message ref is written right after the post
        incidents = service.flow.incidents.list(open_only=True)
        if incidents and incidents[0].chat is not None:
            return incidents[0]
        time.sleep(0.1)
    raise AssertionError("the incident was never posted")


def thread_posts(standin: SlackStandIn, ts: str, n: int) -> list[Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        posts = [c for c in standin.calls_of("chat.postMessage")
                 if c.params.get("thread_ts") == ts]
        if len(posts) >= n:
            return posts
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} replies in thread {ts}")


def test_evidence_table_in_the_thread_and_raw_output_on_demand(bot: Any) -> None:
    service, standin, sender = bot
    sender.slash(USER, "/ir", "diag gpu-01 vram_idle")
    incident = diagnosed(service)
    assert incident.chat is not None
    ts, channel = incident.chat.ts, incident.chat.channel
    [table] = thread_posts(standin, ts, 1)  # the compact table, posted once
    shown = str(table.params.get("blocks"))
    assert "GPU" in shown and "MEMORY" in shown and "nvidia-smi" not in shown
    parent = standin.messages[(channel, ts)]  # the card as edited after the alert card
    assert "nvidia-smi" not in str(parent.get("blocks"))
    assert "Raw evidence" in str(parent.get("blocks"))

    sender.slash(USER, "/ir", f"evidence {incident.id}")
    assert any(f"Raw evidence of {incident.id} posted" in t for t in replies(standin, 2))
    raw = thread_posts(standin, ts, 2)[1]
    assert "nvidia-smi" in str(raw.params.get("blocks")) and "77600" in str(raw.params)

    resp = sender.block_action(USER, "evidence", incident.id, channel=channel, message_ts=ts)
    assert resp.status_code == 200
    again = thread_posts(standin, ts, 3)[2]
    assert "nvidia-smi" in str(again.params.get("blocks"))
    told = standin.wait_for("chat.postEphemeral", 1, 30)
    assert f"Raw evidence of {incident.id} posted" in str(told[0].params["text"])

    sender.slash(USER, "/ir", "evidence INC-999")
    assert any("No incident INC-999" in t for t in replies(standin, 3))


def test_an_ack_typed_elsewhere_is_answered_privately_where_it_was_typed(bot: Any) -> None:
    """`/ir ack` is queued as a click event and the flow answers once it applied it: in the
    channel the person typed it in (a DM, an ops channel), not only the incident's."""
    service, standin, sender = bot
    sender.slash(USER, "/ir", "diag gpu-01 vram_idle")
    incident = diagnosed(service)
    assert sender.slash(USER, "/ir", f"ack {incident.id}", channel="C0OPS").status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        told = [c.params for c in standin.calls_of("chat.postEphemeral")
                if incident.id in str(c.params.get("text", ""))]
        if told:
            break
        time.sleep(0.1)
    assert told, "the flow never answered the ack"
    assert told[0]["channel"] == "C0OPS" and told[0]["user"] == USER
    assert "acknowledged" in str(told[0]["text"]).lower(), told[0]
    assert service.flow.incidents.require(incident.id).acked_by == USER
