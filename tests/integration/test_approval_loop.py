"""The approval loop through the assembled bot: clicks as Slack sends them, the message
rendered from stored state, the unhappy paths and the incident-level decisions.

Real: redis-server, the sim host over OpenSSH sshd, our service on uvicorn. Stand-in:
Slack's Web API.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from bot.chat.blockkit import to_payload
from bot.domain.incident_record import Running
from bot.domain.lifecycle import IncidentState
from bot.flow import timers
from bot.sim.sshd import SimHost
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    MALLORY,
    ONCALL,
    UNIT,
    Loop,
    action,
    audit_rows,
    buttons,
    loop,
    loop_settings,
    stops,
    wait_until,
)

S = IncidentState
SimFactory = Callable[..., SimHost]


def test_a_20s_action_is_acked_at_once_and_shows_running_before_its_result(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed", overrides={"units": {UNIT: {"stop_delay_s": 20}}})
    loop.start(loop_settings(redis_url, sim, loop.standin,
                             {"remediation": {"settle_s": 0.3, "step_timeout_s": 40}}))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    before = loop.message(incident_id)
    reply = loop.click(ONCALL, before, action("approve"))
    assert reply.status_code == 200
    # the HTTP answer came back while the 20 s stop is still blocking on the host
    assert loop.state(incident_id) in (S.AWAITING_APPROVAL, S.APPROVED, S.REMEDIATING)
    running = loop.wait_text(incident_id, f"running: stop {UNIT}", timeout_s=10)
    assert "Approved by <@UALICE>" in json.dumps(running)
    assert loop.state(incident_id) in (S.APPROVED, S.REMEDIATING)
    assert "Approve" not in buttons(running)  # nothing else to approve while it runs
    loop.wait_state(incident_id, S.VERIFIED, timeout_s=90)
    final = loop.wait_text(incident_id, "8/8 GPUs free")
    assert "running" not in json.dumps(final) and "awaiting approval" not in final["text"]
    edits = [json.dumps(c.params) for c in loop.standin.calls_of("chat.update")]
    first_running = next(i for i, e in enumerate(edits) if "running: stop" in e)
    first_result = next(i for i, e in enumerate(edits) if "8/8 GPUs free" in e)
    assert first_running < first_result
    granted = next(c for c in loop.standin.calls_of("chat.postEphemeral")
                   if c.params["user"] == ONCALL)
    result_edit = next(c for c in loop.standin.calls_of("chat.update")
                       if "8/8 GPUs free" in json.dumps(c.params))
    assert granted.at < result_edit.at and f"running now: stop {UNIT}" in str(
        granted.params["text"])
    assert stops(sim) == 1


def test_alternatives_are_withdrawn_and_a_stale_click_changes_nothing(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    before = loop.message(incident_id)
    approvals = loop.flow.approvals.for_incident(incident_id)
    chosen = next(a for a in approvals if a.kind == "systemd.stop_disable")
    loop.click(ONCALL, before, lambda el: el.get("value") == chosen.id
               and el["action_id"].startswith("approve"))
    loop.wait_state(incident_id, S.VERIFIED)
    final = loop.wait_text(incident_id, "8/8 GPUs free")
    loop.drain()
    others = [a for a in loop.flow.approvals.for_incident(incident_id)
              if a.id != chosen.id and a.created_at <= chosen.created_at]
    cancelled = {d["approval_id"] for _, act, d in audit_rows(loop.flow, incident_id)
                 if act == "approval.cancelled"}
    assert cancelled == {a.id for a in others}
    assert all(a.status.value == "cancelled" for a in others if a.id in cancelled)
    shown = loop.message(incident_id)
    assert all(a.id not in json.dumps(shown) for a in others), "withdrawn: no buttons"
    # a stale client clicks Approve again, and an alternative, from the first message
    updates, n_stops = len(loop.standin.calls_of("chat.update")), stops(sim)
    loop.click(ONCALL, before, lambda el: el.get("value") == chosen.id)
    for other in others:
        loop.click(ONCALL, before, lambda el, o=other: el.get("value") == o.id
                   and el["action_id"].startswith("approve"))
    wait_until(lambda: len(loop.ephemerals(ONCALL)) >= 2 + len(others), 15, "the refusals")
    loop.drain()
    replies = loop.ephemerals(ONCALL)[1:]
    assert "Already approved" in replies[0]
    assert all("withdrawn" in r for r in replies[1:])
    assert stops(sim) == n_stops
    assert loop.message(incident_id) == shown == final
    assert len(loop.standin.calls_of("chat.update")) == updates
    # Resolve: nothing clickable is left on a resolved incident
    loop.click(ONCALL, shown, action("incident_resolve"))
    loop.wait_state(incident_id, S.RESOLVED)
    resolved = loop.wait_text(incident_id, "Resolved by <@UALICE>")
    assert buttons(resolved) == []
    trail = audit_rows(loop.flow, incident_id)
    assert (ONCALL, "incident.resolve") in [(a, b) for a, b, _ in trail]


def test_action_failed_shows_what_failed_with_retry_and_escalate(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed", overrides={"units": {UNIT: {"stop_delay_s": 30}}})
    rem = {"settle_s": 0.3, "step_timeout_s": 0.5, "reprobe_s": 0.5, "verify_timeout_s": 1.0}
    # escalation has somewhere to go: the Escalate button is offered (issue 29)
    loop.start(loop_settings(redis_url, sim, loop.standin, {"remediation": rem},
                             slack={"escalation_channel": "C0ESCAL"}))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    loop.click(ONCALL, loop.message(incident_id), action("approve"))
    loop.wait_state(incident_id, S.ACTION_FAILED)
    failed = loop.wait_text(incident_id, "Not fixed")  # what verify saw, in its words
    text = json.dumps(failed)
    assert "timed out" in text and f"systemctl stop {UNIT}" in text  # the captured evidence
    assert {"Retry", "Escalate"} <= set(buttons(failed)) and "Approve" not in buttons(failed)
    trail = audit_rows(loop.flow, incident_id)
    transitions = [d["to"] for _, act, d in trail if act == "transition"]
    assert transitions[-1] == "action_failed"
    loop.click(ONCALL, failed, action("incident_escalate"))
    loop.wait_text(incident_id, "Escalated by <@UALICE>")
    trail = audit_rows(loop.flow, incident_id)
    assert (ONCALL, "incident.escalate") in [(a, b) for a, b, _ in trail]


def test_diagnosis_failed_says_why_and_offers_retry(
        loop: Loop, redis_url: str, sim_factory: SimFactory, tmp_path: Path) -> None:  # noqa: F811
    sim = sim_factory("seed")
    wrong = tmp_path / "wrong_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(wrong)], check=True)
    loop.start(loop_settings(redis_url, sim, loop.standin, key=str(wrong)))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.DIAGNOSIS_FAILED)
    shown = loop.wait_text(incident_id, "Diagnosis failed")
    assert "authentication" in json.dumps(shown).lower()
    assert "Retry" in buttons(shown) and "Approve" not in buttons(shown)
    assert "awaiting approval" not in shown["text"]
    loop.click(MALLORY, shown, action("incident_retry"))
    wait_until(lambda: loop.ephemerals(MALLORY), 15, "the refusal")
    assert "not allowed" in loop.ephemerals(MALLORY)[0]
    loop.click(ONCALL, shown, action("incident_retry"))
    wait_until(lambda: [d["to"] for _, act, d in audit_rows(loop.flow, incident_id)
                        if act == "transition"].count("diagnosis_failed") == 2, 60, "a retry")
    actions = [(a, b) for a, b, _ in audit_rows(loop.flow, incident_id)]
    assert (ONCALL, "incident.retry") in actions and (MALLORY, "incident.refused") in actions


def test_no_action_lists_what_was_found_and_offers_resolve(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("disk_full")
    loop.start(loop_settings(redis_url, sim, loop.standin,
                             {"diagnostics": {"journal_vacuum_size": "100G"}}))
    incident_id = loop.open("disk_full")
    loop.wait_state(incident_id, S.NO_ACTION)
    shown = loop.wait_text(incident_id, "Nothing to run automatically")
    assert "/data" in json.dumps(shown)
    assert "Resolve" in buttons(shown) and "Approve" not in buttons(shown)
    trail = audit_rows(loop.flow, incident_id)
    transitions = [d["to"] for _, act, d in trail if act == "transition"]
    assert transitions == ["diagnosing", "no_action"]


def test_ack_and_snooze_buttons_and_slash_resolve(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    bot = loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    loop.click(ONCALL, loop.message(incident_id), action("incident_ack"))
    acked = loop.wait_text(incident_id, "Acknowledged by <@UALICE>")
    assert "Ack" not in buttons(acked) and "Approve" in buttons(acked)
    events = loop.flow.events.read()
    assert any(e["type"] == "incident.ack" and e["incident_id"] == incident_id
               and e.get("user") == ONCALL for _, e in events)
    loop.click(ONCALL, acked, lambda el: el["text"]["text"] == "Snooze 2 h")
    loop.wait_state(incident_id, S.SNOOZED)
    snoozed = loop.wait_text(incident_id, "Snoozed by <@UALICE>")
    assert buttons(snoozed) == ["Resolve"]
    detail = next(d for u, act, d in audit_rows(loop.flow, incident_id)
                  if act == "incident.snoozed" and u == ONCALL)
    assert detail["duration_s"] == 7200
    bot.sender.slash(ONCALL, "/ir", f"resolve {incident_id}")
    loop.wait_state(incident_id, S.RESOLVED)
    assert buttons(loop.wait_text(incident_id, "Resolved by <@UALICE>")) == []
    # queued by the desk, applied by the flow, which answers privately (issue 34): an
    # ephemeral in the incident's channel, no longer the slash command's own reply
    wait_until(lambda: f"Resolved incident {incident_id}." in loop.ephemerals(ONCALL), 15,
               "the flow's private answer to /ir resolve")
    assert loop.standin.calls_of("response_url") == []
    trail = audit_rows(loop.flow, incident_id)
    decisions = [(u, act) for u, act, _ in trail if act.startswith("incident.")]
    assert decisions == [(ONCALL, "incident.ack"), (ONCALL, "incident.snoozed"),
                         (ONCALL, "incident.resolve")]


def test_two_replicas_run_the_same_click_once_and_agree_on_the_message(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    settings = loop_settings(redis_url, sim, loop.standin)
    first, second = loop.start(settings), loop.start(settings)
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    before = loop.message(incident_id)
    with ThreadPoolExecutor(2) as pool:  # Slack retried the delivery to the other replica
        replies = list(pool.map(lambda b: loop.click(ONCALL, before, action("approve"), bot=b),
                                [first, second]))
    assert [r.status_code for r in replies] == [200, 200]
    loop.wait_state(incident_id, S.VERIFIED)
    loop.wait_text(incident_id, "8/8 GPUs free")
    loop.drain()
    assert stops(sim) == 1
    approved = [a for _, a, _ in audit_rows(loop.flow, incident_id) if a == "approval.approved"]
    assert approved == ["approval.approved"]
    stored = loop.message(incident_id)
    for bot in (first, second):
        ctx = bot.service.flow
        rendered = ctx.publisher.render_stored(ctx.incidents.require(incident_id))
        assert rendered is not None
        assert to_payload(rendered) == {"text": stored["text"], "blocks": stored["blocks"]}
    applied = first.service.flow.renders.applied(incident_id)
    assert applied == second.service.flow.renders.applied(incident_id) > 0


def test_a_snooze_that_ran_out_wakes_where_it_was(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    bot = loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    desk, f = bot.service.desk, loop.flow
    assert desk.incident("snooze", incident_id, ONCALL, 1) == ""  # queued for the flow
    loop.wait_state(incident_id, S.SNOOZED)  # the consumer applied it, then told the clicker
    wait_until(lambda: any("Snoozed incident" in t for t in loop.ephemerals(ONCALL)), 10,
               "the flow's private answer to the snooze")
    timers.expire_approvals(desk, f.decide, f.act, f.reboots)  # not due yet: stays snoozed
    assert loop.state(incident_id) is S.SNOOZED
    snooze = loop.flow.incidents.require(incident_id).snooze
    assert snooze is not None
    wait_until(lambda: time.time() > snooze.until, 5, "the snooze to run out")
    timers.expire_approvals(desk, f.decide, f.act, f.reboots)
    assert loop.state(incident_id) is S.AWAITING_APPROVAL
    woken = loop.wait_text(incident_id, "Snooze 30 min")
    assert "Snoozed by" not in json.dumps(woken) and "Approve" in buttons(woken)
    assert "snooze ended" in [d.get("reason") for _, a, d in audit_rows(loop.flow, incident_id)
                              if a == "transition"]


def test_an_action_left_running_by_a_dead_replica_becomes_action_failed(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    ctx = loop.flow  # what a replica that died right after accepting leaves behind
    ctx.incidents.transition(incident_id, S.APPROVED, ONCALL, "approved systemd.stop_disable")
    running = Running("systemd.stop_disable", ONCALL, time.time() - 3600)
    ctx.incidents.update(incident_id, lambda i: replace(i, running=running))
    assert ctx.act.recover_stalled() == []  # an action step is the reconciler's alone
    assert ctx.act.settle_interrupted(incident_id, "owner gone")  # what its sweep calls
    assert loop.state(incident_id) is S.ACTION_FAILED
    shown = loop.wait_text(incident_id, "interrupted (the bot stopped while it ran)")
    assert "running:" not in json.dumps(shown) and "Retry" in buttons(shown)
    assert ctx.act.recover_stalled() == []
