"""Stale and resolved (issue 25) through the assembled bot: an alert that clears while its
incident awaits approval withdraws the approval; a later Approve or Deny, clicked as Slack
sends it, runs nothing on the host and tells the clicker privately why.

Real: redis-server, the sim host over OpenSSH sshd, our service on uvicorn. Stand-in:
Slack's Web API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from bot.domain.approval import ApprovalStatus, Resolver
from bot.domain.lifecycle import IncidentState
from bot.sim.sshd import SimHost
from tests.fixtures.alerts import ALERT_TOKEN, AUTH, am_alert, am_payload
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    MALLORY,
    ONCALL,
    UNIT,
    Bot,
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


def post_am(bot: Bot, *alerts: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(f"{bot.served.url}/alerts/alertmanager", json=am_payload(*alerts),
                        headers=AUTH, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def late_reply(lp: Loop, user: str, n: int) -> str:
    """The ``n``-th private reply to ``user`` (waited for, never slept for)."""
    replies = wait_until(lambda: len(lp.ephemerals(user)) >= n and lp.ephemerals(user), 15,
                         f"{n} private replies to {user}")
    return str(replies[n - 1])


def test_an_alert_that_clears_withdraws_the_approval_and_a_late_click_runs_nothing(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    bot = loop.start(loop_settings(redis_url, sim, loop.standin,
                                   incident_bot_alert_token=ALERT_TOKEN))
    alert = am_alert("gpu-01", fp="fp-idle", severity="critical")
    (incident_id,) = post_am(bot, alert)["incidents"]
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    before = loop.message(incident_id)
    offered = loop.flow.approvals.for_incident(incident_id)
    assert offered and all(a.status is ApprovalStatus.PENDING for a in offered)

    # Alertmanager says the alert cleared, through the served endpoint
    assert post_am(bot, {**alert, "status": "resolved"})["outcomes"] == {"resolved": 1}
    assert loop.state(incident_id) is S.RESOLVED
    withdrawn = loop.flow.approvals.for_incident(incident_id)
    assert [(a.status, a.resolved_by) for a in withdrawn] == [
        (ApprovalStatus.CANCELLED, Resolver.ALERT)] * len(offered)
    assert loop.flow.approvals.pending() == []
    shown = wait_until(lambda: "Approve" not in buttons(loop.message(incident_id))
                       and loop.message(incident_id), 30, "the message without Approve")
    assert "Deny" not in buttons(shown)

    # a stale client still shows the buttons: Approve, then Deny
    assert loop.click(ONCALL, before, action("approve")).status_code == 200
    said = late_reply(loop, ONCALL, 1)
    assert said.startswith(f"Incident {incident_id} was resolved at ")
    assert said.endswith(" UTC by the alert: nothing ran.")
    assert "running" not in said
    assert loop.click(ONCALL, before, action("deny")).status_code == 200
    assert late_reply(loop, ONCALL, 2) == said
    loop.drain()
    assert loop.standin.calls_of("views.open") == []  # no deny modal for a withdrawn one
    assert stops(sim) == 0
    assert loop.state(incident_id) is S.RESOLVED
    trail = audit_rows(loop.flow, incident_id)
    assert sorted(d["approval_id"] for u, act, d in trail if act == "approval.cancelled"
                  and u == "alertmanager") == sorted(a.id for a in offered)
    clicks = [d for u, act, d in trail if act == "approval.withdrawn_click" and u == ONCALL]
    assert len(clicks) == 2 and all(d["resolved_by"] == "alert" for d in clicks)
    assert not [act for _, act, _ in trail if act in ("approval.approved", "action.skipped")]


def test_a_late_click_after_a_person_resolved_names_them(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    loop.start(loop_settings(redis_url, sim, loop.standin))
    incident_id = loop.open()
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    before = loop.message(incident_id)
    loop.click(ONCALL, before, action("incident_resolve"))
    loop.wait_state(incident_id, S.RESOLVED)
    loop.click(ONCALL, before, action("approve"))
    said = wait_until(lambda: [r for r in loop.ephemerals(ONCALL) if "nothing ran" in r], 15,
                      "the late click's reply")[0]
    assert said.endswith(" UTC by <@UALICE>: nothing ran.")
    assert stops(sim) == 0
    cancelled = [(u, d["resolved_by"]) for u, act, d in audit_rows(loop.flow, incident_id)
                 if act == "approval.cancelled"]
    assert cancelled and set(cancelled) == {(ONCALL, "person")}


def test_a_non_approvers_diag_is_refused_privately_audited_and_touches_no_host(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("seed")
    bot = loop.start(loop_settings(redis_url, sim, loop.standin))
    ack = bot.sender.slash(MALLORY, "/ir", "diag gpu-01 gpu_health")
    assert ack.status_code == 200
    said = ack.json().get("text") if ack.content else None
    if not said:
        said = wait_until(lambda: loop.standin.calls_of("response_url"), 15,
                          "the slash reply")[-1].params["text"]
    assert str(said).startswith("You are not allowed to run a diagnosis on gpu-01")
    assert f"<@{ONCALL}>" in str(said)
    refused = [(e.actor, e.action, e.detail) for e in loop.flow.audit.recent()
               if e.action == "incident.refused"]
    assert refused == [(MALLORY, "incident.refused",
                        {"verb": "diag", "host": "gpu-01", "playbook": "gpu_health"})]
    assert loop.flow.incidents.list() == [] and sim.command_log() == []
