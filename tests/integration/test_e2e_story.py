"""The crash-recovery story end to end through the Slack path.

Real: redis-server, the sim host over OpenSSH sshd, our HTTP service (uvicorn) with the
Bolt app mounted, the flow consumer, the leader scheduler, an RQ worker process and the
torch extraction. Stand-in: Slack's Web API (signed requests sent to us as Slack would).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from prometheus_client.parser import text_string_to_metric_families
from redis import Redis

from bot.config.settings import Settings
from bot.demo.story import crashed_job, send_alert
from bot.domain.lifecycle import IncidentState
from bot.extract.demo_data import prepare_interrupted_run
from bot.extract.spec import load_spec
from bot.rig.serving import ServedApp
from bot.rig.signed import SignedSender
from bot.rig.slack_standin import SlackStandIn
from bot.service import Service, build_service
from bot.sim.sshd import SimHost
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.jobs import JobStore
from tests.fixtures.bots import is_alert_card, wait_until
from tests.fixtures.slack_payloads import block_actions, find_button, form

SECRET, TOKEN, ALERT_TOKEN = "e2e-signing-secret", "xoxb-e2e", "e2e-alert-token"
ONCALL, MALLORY, CHANNEL = "UALICE", "UMALLORY", "C0INCIDENT"


def settings_for(redis_url: str, sim: SimHost, standin: SlackStandIn) -> Settings:
    return Settings.model_validate({
        "redis_url": redis_url,
        "hosts": {"gpu-01": {"ssh": sim.target, "key": str(sim.key_path),
                             "known_hosts": str(sim.known_hosts_path)}},
        "slack": {"channel": CHANNEL, "approvers": [ONCALL], "api_url": standin.api_url},
        "alerts": {"group_wait_s": 0},
        "extra": {"remediation": {"chain_resume": True, "settle_s": 0.5},
                  "scheduler": {"lease_ttl_s": 3, "renew_s": 1,
                                "jobs": {"progress": {"every_s": 1}}}},
        "slack_signing_secret": SECRET, "slack_bot_token": TOKEN,
        "incident_bot_alert_token": ALERT_TOKEN,
    })


def click_stop_disable(world: dict[str, Any], user: str, message: dict[str, Any]) -> httpx.Response:
    """``user`` clicks Approve on the stop_disable action of ``message`` (as Slack would send)."""
    store = ApprovalStore(world["redis"])

    def is_it(el: dict[str, Any]) -> bool:
        approval = store.get(str(el.get("value", "")))
        return (el["action_id"].startswith("approve") and approval is not None
                and approval.kind == "systemd.stop_disable")

    block_id, button = find_button(message, is_it)
    payload = block_actions(message, CHANNEL, user, block_id, button, world["standin"].base)
    return world["sender"].post(form(payload))


def last_message(standin: SlackStandIn, ts: str) -> dict[str, Any]:
    """The parent message exactly as the stand-in last recorded it."""
    return dict(standin.messages[(CHANNEL, ts)])


@pytest.fixture
def world(tmp_path: Path, redis: Redis, redis_url: str,
          sim_factory: Callable[..., SimHost]) -> Iterator[dict[str, Any]]:
    sim = sim_factory("seed")
    spec_path = prepare_interrupted_run(tmp_path / "extract")
    standin = SlackStandIn(token=TOKEN).start()
    worker = subprocess.Popen([sys.executable, "-m", "bot.cli", "worker", "--host", "gpu-01",
                               "--url", redis_url, "--fast"], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    world: dict[str, Any] = {"sim": sim, "spec": spec_path, "standin": standin, "redis": redis,
                             "redis_url": redis_url}

    def start_bot() -> None:
        service: Service = build_service(settings_for(redis_url, sim, standin))
        served = ServedApp(service.app).start()
        service.start_background()
        sender = SignedSender(f"{served.url}/slack/events", SECRET, standin.base)
        world.update(service=service, served=served, url=served.url, sender=sender)

    def stop_bot() -> None:
        world["sender"].close()
        world["served"].stop()
        world["service"].close()

    def restart() -> None:
        """A new bot process: nothing carried over but Redis."""
        stop_bot()
        start_bot()

    start_bot()
    world["restart"] = restart
    try:
        yield world
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=20)
        stop_bot()
        standin.stop()


def stops_run(sim: SimHost) -> list[dict[str, Any]]:
    return [e for e in sim.command_log()
            if e.get("tool") == "systemctl" and e["argv"][:1] in (["stop"], ["disable"])]


@pytest.mark.parametrize("restart_before_click", [False, True], ids=["same-bot", "restarted-bot"])
def test_crash_recovery_story_through_slack(world: dict[str, Any],
                                            restart_before_click: bool) -> None:
    sim, standin = world["sim"], world["standin"]
    finished_before = len(list(load_spec(world["spec"]).output_dir.glob("*.pt")))  # 1 corrupt
    job_id = crashed_job(world["redis_url"], world["spec"])
    incident_id = send_alert(world["url"], ALERT_TOKEN)

    standin.wait_for("chat.postMessage", 1, timeout_s=30)
    parents = [c for c in standin.calls_of("chat.postMessage") if not c.params.get("thread_ts")]
    assert len(parents) == 1
    (channel, ts), _ = next(iter(standin.messages.items()))
    assert channel == CHANNEL
    wait_until(lambda: not is_alert_card(last_message(standin, ts)), 60,
               "the alert card edited into the diagnosis")  # posted at diagnosing (issue 29)
    before = last_message(standin, ts)  # what the approver's client shows
    assert "Approve or deny: stop vllm-kimi-k25-int4.service" in before["text"]
    assert "Awaiting approval · incident " + incident_id in json.dumps(before["blocks"],
                                                                   ensure_ascii=False)
    if restart_before_click:
        world["restart"]()

    assert click_stop_disable(world, MALLORY, before).status_code == 200
    refusal = standin.wait_for("chat.postEphemeral", 1, timeout_s=15)[0]
    assert refusal.params["user"] == MALLORY
    assert stops_run(sim) == []

    assert click_stop_disable(world, ONCALL, last_message(standin, ts)).status_code == 200
    store = world["service"].flow.incidents
    try:
        wait_until(lambda: store.require(incident_id).state is IncidentState.RESOLVED, 120,
                   "the incident to resolve after the extraction")
    except AssertionError:
        timeline = [(e.actor, e.action, e.detail) for e in AuditLog(world["redis"]).timeline(
            incident_id)]
        raise AssertionError(f"state {store.require(incident_id).state}: {timeline}") from None

    assert [e["argv"][:2] for e in stops_run(sim)] == [
        ["stop", "vllm-kimi-k25-int4.service"], ["disable", "vllm-kimi-k25-int4.service"]]
    used = subprocess.run(sim.ssh_argv("nvidia-smi --query-gpu=memory.used --format=csv,noheader,"
                                       "nounits"), capture_output=True, text=True, timeout=30)
    assert [int(x) for x in used.stdout.split()] == [0] * 8
    check_extraction(world, job_id, finished_before - 1)
    assert world["service"].flow.outbox.flush(10)  # what Slack's pace held back goes now
    check_thread(standin, ts)
    check_final_message(world, ts)
    check_stale_click(world, before, ts)
    check_audit(world["redis"], incident_id)
    check_metrics(world["url"], job_id)


def check_final_message(world: dict[str, Any], ts: str) -> None:
    """The parent's last update shows the final state, with nothing left to click."""
    standin = world["standin"]
    wait_until(lambda: "resolved" in last_message(standin, ts)["text"], 30,
               "the parent message to show resolved")
    final = last_message(standin, ts)
    shown = json.dumps(final)
    assert "awaiting approval" not in shown
    assert "8/8 GPUs free" in shown and "resumed" in shown  # verified, then resumed
    assert not [b for b in final["blocks"] if b["type"] == "actions"], "no buttons on resolved"
    updates = [c for c in standin.calls_of("chat.update") if c.params.get("ts") == ts]
    assert updates and "resolved" in str(updates[-1].params["text"])
    assert any("running" in json.dumps(c.params.get("blocks")) for c in updates)


def check_stale_click(world: dict[str, Any], before: dict[str, Any], ts: str) -> None:
    """A click built from the pre-approval message runs nothing and changes nothing."""
    standin = world["standin"]
    # the consumer's last render (on incident.resolved) comes before its postmortem post:
    # once that is in the thread and the outbox is empty, nothing else is on its way
    wait_until(lambda: any("Postmortem" in str(c.params.get("text"))
                           for c in standin.calls_of("chat.postMessage")), 30,
               "the postmortem in the thread")
    assert world["service"].flow.outbox.flush(10)
    final, updates = last_message(standin, ts), len(standin.calls_of("chat.update"))
    stops = len(stops_run(world["sim"]))
    ephemerals = len(standin.calls_of("chat.postEphemeral"))
    assert click_stop_disable(world, ONCALL, before).status_code == 200
    answer = standin.wait_for("chat.postEphemeral", ephemerals + 1, timeout_s=15)[-1]
    assert "Already approved" in answer.params["text"]
    world["service"].chat_app.drain()
    assert len(stops_run(world["sim"])) == stops
    assert last_message(standin, ts) == final
    assert len(standin.calls_of("chat.update")) == updates


def check_metrics(url: str, job_id: str) -> None:
    """What happened is visible on /metrics (the registry is per process: counts are >=)."""
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{url}/metrics").text)}

    def value(family: str, **labels: str) -> float:
        return sum(s.value for s in families[family].samples
                   if all(s.labels.get(k) == v for k, v in labels.items())
                   and not s.name.endswith(("_created", "_bucket", "_sum")))

    assert value("incident_bot_actions", kind="systemd.stop_disable", result="succeeded") >= 1
    assert value("incident_bot_approvals", outcome="unauthorised") >= 1
    assert value("incident_bot_diagnosis_duration_seconds", playbook="vm_restart") >= 2
    assert not any(s.labels.get("job") == job_id
                   for s in families["incident_bot_job_progress_ratio"].samples)


def check_extraction(world: dict[str, Any], job_id: str, intact_before: int) -> None:
    from bot.jobs import queue
    status = queue.status(JobStore(_bytes(world["redis_url"])), job_id)
    assert status.state.value == "completed"
    assert status.resumed_from == intact_before
    assert status.repaired.get("partial_removed") == 1
    assert status.repaired.get("corrupt_recomputed") == 1
    out = load_spec(world["spec"]).output_dir
    files = sorted(out.glob("*.pt"))
    assert len(files) == 200
    for path in files:
        torch.load(path, weights_only=True)
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def _bytes(url: str) -> Redis:
    from storage.connection import connect

    return connect(url, decode=False)


def check_thread(standin: SlackStandIn, ts: str) -> None:
    in_thread = [c for c in standin.calls_of("chat.postMessage") if c.params.get("thread_ts") == ts]
    texts = [str(c.params.get("text", "")) for c in in_thread]
    edits = [str(c.params.get("text", "")) for c in standin.calls_of("chat.update")]
    assert any("8/8 GPUs free" in t for t in texts), texts
    assert any("▓" in t for t in texts + edits), "a progress bar was posted or edited in"
    assert any("completed 200/200" in t for t in texts), texts


def check_audit(redis: Redis, incident_id: str) -> None:
    actions = [(e.action, e.detail.get("to")) for e in AuditLog(redis).timeline(incident_id)]
    order = [("transition", "diagnosing"), ("transition", "awaiting_approval"),
             ("approval.refused", None), ("approval.approved", None),
             ("transition", "approved"), ("transition", "remediating"),
             ("action.started", None), ("action.succeeded", None),
             ("transition", "verified"), ("transition", "resumed"),
             ("transition", "resolved")]
    positions = [actions.index(step) for step in order]
    assert positions == sorted(positions), actions
