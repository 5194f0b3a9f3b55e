"""Fleet policies through ``serve`` (issue 28): alerts posted over HTTP, the assembled bot
on uvicorn, one simulated GPU host per inventory name (the seed scenario: vLLM auto-started
at boot holds every GPU), Slack's stand-in, clicks signed as Slack signs them.

Real: redis-server, OpenSSH sshd per sim host, our service. Stand-ins: Slack's Web API
(and its ``usergroups.users.list``), PagerDuty's Events v2.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any, cast

import httpx
import pytest
from redis import Redis

from bot.config.settings import Settings
from bot.domain.lifecycle import IncidentState
from bot.rig.pagerduty_standin import PagerDutyStandIn
from bot.sim.sshd import SimHost
from storage import keys
from storage.policy_limits import PolicyLimits
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    CHANNEL,
    ONCALL,
    SECRET,
    TOKEN,
    UNIT,
    Loop,
    action,
    audit_rows,
    buttons,
    loop,
    stops,
    wait_until,
)

S = IncidentState
SimFactory = Callable[..., SimHost]
ALERT_TOKEN = "policy-alert-token"
POLICY = "stop-autostarted-inference"
GPUOPS, BOB = "S0GPUOPS", "UBOB"  # the policy's approvers: a usergroup with Bob in it
FAST = {"settle_s": 0.3, "verify_timeout_s": 5, "poll_interval_s": 0.1}


def stop_policy(mode: str = "auto", max_hosts: int = 3) -> dict[str, Any]:
    return {"name": POLICY, "mode": mode, "limit": {"max_hosts": max_hosts, "per": "1h"},
            "match": {"action": "systemd.stop_disable", "unit": "vllm-*", "hosts": "gpu-*",
                      "kinds": ["vm_restart", "vram_idle"]},
            "approvers": [GPUOPS]}


def fleet_settings(redis_url: str, sims: dict[str, SimHost], loop: Loop,  # noqa: F811
                   policies: list[dict[str, Any]], fraction: float = 1.0,
                   **top: Any) -> Settings:
    """``serve``'s settings for ``sims`` (inventory name → sim host) under ``policies``."""
    hosts = {name: {"ssh": sim.target, "key": str(sim.key_path),
                    "known_hosts": str(sim.known_hosts_path)} for name, sim in sims.items()}
    return Settings.model_validate({
        "redis_url": redis_url, "hosts": hosts,
        "slack": {"channel": CHANNEL, "approvers": [ONCALL], "api_url": loop.standin.api_url},
        "alerts": {"group_wait_s": 0},
        "extra": {"remediation": FAST, "scheduler": {"enabled": False}},
        "policies": policies, "policy_limits": {"max_hosts_per_hour": 10, "max_fraction": fraction},
        "slack_signing_secret": SECRET, "slack_bot_token": TOKEN,
        "incident_bot_alert_token": ALERT_TOKEN, **top})


def seed_hosts(sim_factory: SimFactory, n: int) -> dict[str, SimHost]:
    return {f"gpu-0{i}": sim_factory("seed") for i in range(1, n + 1)}


def post_alerts(loop: Loop, hosts: list[str], kind: str = "vm_restart") -> list[str]:  # noqa: F811
    """The alerts as a monitoring system posts them: one JSON body, through HTTP."""
    body = [{"host": h, "kind": kind, "severity": "critical", "summary": "VM restarted"}
            for h in hosts]
    reply = httpx.post(f"{loop.bots[0].served.url}/alerts", json=body, timeout=10,
                       headers={"Authorization": f"Bearer {ALERT_TOKEN}"})
    assert reply.status_code == 200, reply.text
    return [str(i) for i in reply.json()["incidents"]]


def unit_active(sim: SimHost) -> bool:
    """Running or enabled: the unit still holds (or will take) the GPUs."""
    unit = sim.state()["units"][UNIT]
    return (unit["active_state"], unit["unit_file_state"]) != ("inactive", "disabled")


def thread(loop: Loop, incident_id: str) -> list[str]:  # noqa: F811
    """The texts posted in the incident's thread, in order (none before it is posted)."""
    chat = loop.flow.incidents.require(incident_id).chat
    if chat is None:
        return []
    return [str(c.params.get("text", "")) for c in loop.standin.calls_of("chat.postMessage")
            if c.params.get("thread_ts") == chat.ts]


def thread_line(loop: Loop, incident_id: str, needle: str) -> str:  # noqa: F811
    return str(wait_until(lambda: next((t for t in thread(loop, incident_id) if needle in t),
                                       None), 60, f"{needle!r} in {incident_id}'s thread"))


def test_three_hosts_stopped_by_the_policy_and_the_fourth_asks_saying_why(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sims = seed_hosts(sim_factory, 4)
    loop.standin.groups[GPUOPS] = [BOB]
    loop.start(fleet_settings(redis_url, sims, loop, [stop_policy()]))
    ids = post_alerts(loop, list(sims))
    host_of = dict(zip(ids, sims, strict=True))
    # the hosts are diagnosed at once: which three win the slots is which finish first
    wait_until(lambda: sum(loop.state(i) is S.VERIFIED for i in ids) == 3, 120, "three stops")
    auto = [i for i in ids if loop.state(i) is S.VERIFIED]
    (asked,) = [i for i in ids if i not in auto]
    asked_host, auto_hosts = host_of[asked], sorted(host_of[i] for i in auto)
    counts = []
    for incident_id in auto:
        host = host_of[incident_id]
        done = thread_line(loop, incident_id, "without a click")
        said = re.fullmatch(rf":robot_face: Stopped and disabled `{UNIT}` on {host} without a "
                            rf"click, under policy `{POLICY}` \((\d) of 3 hosts in the last "
                            r"hour: ([^)]*)\)\. Revert below if this was wrong\.", done)
        assert said is not None, done
        listed = said[2].split(", ")
        assert len(listed) == int(said[1]) and host in listed and set(listed) <= set(auto_hosts)
        counts.append(int(said[1]))
        shown = loop.wait_text(incident_id, "8/8 GPUs free")
        assert "Revert" in " ".join(buttons(shown)) and f"policy:{POLICY}" in json.dumps(shown)
        assert not unit_active(sims[host]) and stops(sims[host]) == 1
        decided = [(u, a) for u, a, _ in audit_rows(loop.flow, incident_id)
                   if a in ("approval.approved", "action.started")]
        assert (f"policy:{POLICY}", "approval.approved") in decided
    assert sorted(counts) == [1, 2, 3]  # each host counted once, the slots never exceeded
    loop.wait_state(asked, S.AWAITING_APPROVAL)
    why = thread_line(loop, asked, "limit reached")
    assert why == (f":raised_hand: Policy `{POLICY}` did not run `systemd.stop_disable` on "
                   f"{asked_host}: limit reached: 3 hosts in the last hour "
                   f"({', '.join(auto_hosts)}).")
    assert unit_active(sims[asked_host]) and stops(sims[asked_host]) == 0
    # the global on-call is outside this policy's approvers: refused, the policy named
    message = loop.message(asked)
    assert loop.click(ONCALL, message, action("approve")).status_code == 200
    refused = wait_until(lambda: loop.ephemerals(ONCALL), 15, "the refusal")[0]
    assert refused == ("You are not allowed to approve or deny `systemd.stop_disable` on "
                       f"{asked_host}: policy `{POLICY}` lets only `{GPUOPS}` approve it. "
                       "This attempt was recorded.")
    assert stops(sims[asked_host]) == 0 and loop.state(asked) is S.AWAITING_APPROVAL
    # Bob is in the policy's user group: his click runs it
    loop.click(BOB, loop.message(asked), action("approve"))
    loop.wait_state(asked, S.VERIFIED)
    assert stops(sims[asked_host]) == 1 and not unit_active(sims[asked_host])
    assert not [t for t in thread(loop, asked) if "without a click" in t]
    actors = {u for u, a, _ in audit_rows(loop.flow, asked) if a == "approval.approved"}
    assert actors == {BOB}
    print("\n".join(["", *(thread_line(loop, i, "without a click") for i in auto), why,
                     refused]))


def test_a_shadow_policy_changes_nothing_and_says_what_it_would_have_done(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sims = seed_hosts(sim_factory, 1)
    loop.start(fleet_settings(redis_url, sims, loop, [stop_policy("shadow")]))
    (incident_id,) = post_alerts(loop, ["gpu-01"])
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    said = thread_line(loop, incident_id, "Shadow mode")
    assert said == (f":eyes: Shadow mode: policy `{POLICY}` would have run "
                    "`systemd.stop_disable` on gpu-01 without a click. Nothing ran; approve "
                    "below as usual.")
    shown = loop.message(incident_id)
    assert "Approve" in " ".join(buttons(shown)) and "without a click" not in json.dumps(shown)
    changed = [e for e in sims["gpu-01"].command_log()
               if e.get("tool") == "systemctl" and e["argv"][:1] in (["stop"], ["disable"])]
    assert changed == [] and unit_active(sims["gpu-01"])
    assert loop.state(incident_id) is S.AWAITING_APPROVAL
    assert not [a for _, a, _ in audit_rows(loop.flow, incident_id) if a == "approval.approved"]
    decided = next(d for _, a, d in audit_rows(loop.flow, incident_id) if a == "policy.decided")
    assert (decided["policy"], decided["mode"], decided["hosts"]) == (POLICY, "shadow", [])
    print("\n" + said)


def pending_on(redis: Redis, loop: Loop) -> dict[str, int]:  # noqa: F811
    """Each flow consumer's unacknowledged entries (who is handling an event now)."""
    rows = cast(list[dict[str, Any]], redis.xinfo_consumers(loop.flow.events.stream, "flow"))
    return {str(r["name"]): int(r["pending"]) for r in rows}


def test_two_replicas_never_pass_the_limit_together(
        loop: Loop, redis: Redis, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sims = seed_hosts(sim_factory, 2)
    settings = fleet_settings(redis_url, sims, loop, [stop_policy(max_hosts=1)])
    loop.start(settings), loop.start(settings)
    first = post_alerts(loop, ["gpu-01"])
    # one replica is diagnosing gpu-01: the other, still waiting, takes gpu-02, and both
    # ask the limit for their host at about the same moment
    busy = wait_until(lambda: [n for n, p in pending_on(redis, loop).items() if p], 30,
                      "a replica to take gpu-01")
    second = post_alerts(loop, ["gpu-02"])
    wait_until(lambda: [n for n, p in pending_on(redis, loop).items() if p and n not in busy],
               30, "the other replica to take gpu-02")
    ids = dict(zip(["gpu-01", "gpu-02"], first + second, strict=True))
    ran = wait_until(lambda: next((h for h, i in ids.items() if loop.state(i) is S.VERIFIED),
                                  None), 60, "the host the policy acted on")
    asked = next(h for h in ids if h != ran)
    why = thread_line(loop, ids[asked], "limit reached")
    loop.drain()
    assert stops(sims[ran]) == 1 and stops(sims[asked]) == 0
    assert loop.state(ids[asked]) is S.AWAITING_APPROVAL
    assert f"limit reached: 1 host in the last hour ({ran})" in why
    counted = [d["hosts"] for i in ids.values() for _, a, d in audit_rows(loop.flow, i)
               if a == "policy.decided" and d["mode"] == "auto"]
    assert counted == [[ran]]


def test_the_circuit_breaker_trips_stops_automation_and_pages(
        loop: Loop, redis: Redis, redis_url: str, sim_factory: SimFactory,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PD_POLICY_TEST_KEY", "P" * 32)
    sims = seed_hosts(sim_factory, 2)
    pager = PagerDutyStandIn().start()
    try:
        paging = {"pagerduty": {"routing_key_env": "PD_POLICY_TEST_KEY", "url": pager.url,
                                "after_s": 3600, "timeout_s": 2}}  # incidents: no page yet
        loop.start(fleet_settings(redis_url, sims, loop, [stop_policy()], fraction=0.5,
                                  paging=paging))  # cap: min(10, floor(0.5 × 2 hosts)) = 1
        ids = dict(zip(sims, post_alerts(loop, list(sims)), strict=True))
        # both are diagnosed at once: the first to ask takes the one slot
        ran = wait_until(lambda: next((h for h, i in ids.items()
                                       if loop.state(i) is S.VERIFIED), None), 60, "one stop")
        asked = next(h for h in ids if h != ran)
        why = thread_line(loop, ids[asked], "circuit breaker")
        assert why == (f":raised_hand: Policy `{POLICY}` did not run `systemd.stop_disable` on "
                       f"{asked}: circuit breaker open: 1 host acted on automatically in the "
                       "last hour (cap 1); every automatic action asks for a click.")
        assert loop.state(ids[asked]) is S.AWAITING_APPROVAL and stops(sims[asked]) == 0
        page = wait_until(lambda: next((e.body for e in pager.events
                                        if str(e.body["dedup_key"]).startswith(
                                            "policy-breaker-")), None), 30, "the page")
        assert page["event_action"] == "trigger" and page["payload"]["severity"] == "critical"
        assert page["payload"]["summary"] == (
            f"incident-bot fleet circuit breaker tripped by {asked} under policy {POLICY}: "
            "1 host acted on automatically in the last hour reached the cap of 1; every "
            "automatic action asks for a click until it closes")
        assert page["payload"]["custom_details"]["hosts"] == [ran]
        tripped = [e for e in loop.flow.audit.recent() if e.action == "policy.breaker_tripped"]
        assert len(tripped) == 1 and tripped[0].detail["host"] == asked
        assert [e.body["dedup_key"] for e in pager.events] == [page["dedup_key"]]
        # a person closes it: the page resolves, and nothing else was paged
        assert PolicyLimits(redis, fleet_cap=1).reset(ONCALL)
        key = str(page["dedup_key"])
        wait_until(lambda: pager.alerts().get(key) == "resolved", 30, "the resolve")
        assert pager.actions(key) == ["trigger", "resolve"]
        assert {e.body["dedup_key"] for e in pager.events} == {key}
    finally:
        for bot in loop.bots:  # stop the paging thread before its stand-in goes
            bot.stop()
        loop.bots.clear()
        pager.stop()


def test_a_maintenance_window_records_the_alert_and_posts_nothing(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    window = {"hosts": "gpu-0*", "every": "daily 00:00-24:00 UTC", "reason": "rack move"}
    loop.start(fleet_settings(redis_url, {"gpu-01": sim, "lab-01": sim}, loop,
                              [stop_policy()], maintenance=[window]))
    reply = httpx.post(f"{loop.bots[0].served.url}/alerts", timeout=10,
                       json=[{"host": "gpu-01", "kind": "vm_restart"},
                             {"host": "lab-01", "kind": "disk_full"}],
                       headers={"Authorization": f"Bearer {ALERT_TOKEN}"})
    assert reply.status_code == 200 and reply.json()["outcomes"] == {"silenced": 1, "created": 1}
    (posted,) = reply.json()["incidents"]
    loop.wait_state(posted, S.NO_ACTION, S.AWAITING_APPROVAL)  # lab-01: posted and diagnosed
    loop.message(posted)
    loop.drain()
    assert [i.host for i in loop.flow.incidents.list()] == ["lab-01"]
    tops = [c.params for c in loop.standin.calls_of("chat.postMessage")
            if not c.params.get("thread_ts")]
    assert len(tops) == 1 and "lab-01" in json.dumps(tops[0])  # one message: lab-01's
    (entry,) = [e for e in loop.flow.audit.recent() if e.action == "alert.suppressed"]
    assert (entry.detail["host"], entry.detail["kind"]) == ("gpu-01", "vm_restart")
    assert (entry.detail["window"], entry.detail["reason"]) == (window["every"], "rack move")
    assert [e.action for e in loop.flow.audit.recent()].count("maintenance.set") == 1
    assert stops(sim) == 0  # the policy never saw gpu-01's alert


def test_a_retry_lets_the_policy_act_once_its_limit_has_room(
        loop: Loop, redis: Redis, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    """Every path that diagnoses (the alert, ``/ir diag``, Retry) lets the policy act."""
    sims = seed_hosts(sim_factory, 1)
    loop.standin.groups[GPUOPS] = [BOB]
    bot = loop.start(fleet_settings(redis_url, sims, loop, [stop_policy(max_hosts=1)]))
    limits = PolicyLimits(redis, fleet_cap=10)
    assert limits.try_count(POLICY, "gpu-09", time.time(), 3600, 1).admitted  # the limit: full
    assert bot.sender.slash(ONCALL, "/ir", "diag gpu-01 vm_restart").status_code == 200
    incident_id = wait_until(lambda: next((i.id for i in loop.flow.incidents.list()), None),
                             30, "the incident /ir diag opened")
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    assert "limit reached: 1 host in the last hour (gpu-09)" in thread_line(
        loop, incident_id, "limit reached")
    (stop,) = [a for a in loop.flow.approvals.for_incident(incident_id)
               if a.kind == "systemd.stop_disable"]
    assert bot.service.desk.deny(stop.id, BOB, "not now").acted
    loop.wait_state(incident_id, S.DENIED)
    # the hour went by: the limit (and the fleet count) have room again
    redis.delete(keys.policy_hosts(POLICY), keys.policy_fleet_hosts())
    loop.click(ONCALL, loop.wait_text(incident_id, "Retry"), action("incident_retry"))
    loop.wait_state(incident_id, S.VERIFIED)
    assert "1 of 1 hosts in the last hour: gpu-01" in thread_line(loop, incident_id,
                                                                  "without a click")
    assert stops(sims["gpu-01"]) == 1
    actors = [u for u, a, _ in audit_rows(loop.flow, incident_id) if a == "approval.approved"]
    assert actors == [f"policy:{POLICY}"]
