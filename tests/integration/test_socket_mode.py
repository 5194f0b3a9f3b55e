"""Socket Mode: the bot connects out over a WebSocket; no HTTP listener for Slack at all.

Real: redis-server, the sim host over sshd, the assembled service, slack_sdk's own Socket
Mode client. Stand-ins: Slack's Web API and its Socket Mode endpoint (a WebSocket server
speaking the protocol: hello, envelopes, acks by envelope_id).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from bot.demo.story import send_alert
from bot.domain.lifecycle import IncidentState
from bot.rig.serving import ServedApp
from bot.rig.slack_standin import SlackStandIn
from bot.rig.socket_standin import SocketModeStandIn
from bot.service import build_service
from bot.sim.sshd import SimHost
from tests.fixtures.bots import CHANNEL, ONCALL, TOKEN, UNIT, loop_settings, wait_until
from tests.fixtures.slack_payloads import block_actions, find_button

APP_TOKEN, ALERT_TOKEN = "xapp-1-stand-in", "socket-alert-token"


@pytest.fixture
def socket_bot(redis: Any, redis_url: str,
               sim_factory: Callable[..., SimHost]) -> Iterator[dict[str, Any]]:
    sim = sim_factory("seed")
    socket_standin = SocketModeStandIn().start()
    with SlackStandIn(token=TOKEN) as standin:
        standin.app_token, standin.socket_url = APP_TOKEN, socket_standin.url
        settings = loop_settings(redis_url, sim, standin, slack={"socket_mode": True},
                                 slack_app_token=APP_TOKEN,
                                 incident_bot_alert_token=ALERT_TOKEN)
        service = build_service(settings)
        served = ServedApp(service.app).start()
        service.start_background()
        try:
            yield {"service": service, "served": served, "standin": standin, "sim": sim,
                   "socket": socket_standin}
        finally:
            served.stop()
            service.close()
            socket_standin.stop()


def test_alert_approve_verified_over_socket_mode(socket_bot: dict[str, Any]) -> None:
    standin, socket = socket_bot["standin"], socket_bot["socket"]
    service, url = socket_bot["service"], socket_bot["served"].url
    assert httpx.post(f"{url}/slack/events", content=b"{}").status_code == 404  # no Slack URL
    socket.wait_connected()
    assert standin.calls_of("apps.connections.open")[0].token == APP_TOKEN

    mention = socket.send("events_api", {
        "token": "legacy", "team_id": "T0001", "api_app_id": "A0001", "type": "event_callback",
        "event_id": "Ev0001", "event_time": int(time.time()),
        "event": {"type": "app_mention", "user": ONCALL, "text": "<@UBOT> hi",
                  "ts": "1700000000.000001", "channel": CHANNEL}})
    assert socket.wait_ack(mention)["envelope_id"] == mention

    incident_id = send_alert(url, ALERT_TOKEN)
    store = service.flow.incidents
    wait_until(lambda: store.require(incident_id).state is IncidentState.AWAITING_APPROVAL, 60,
               "the diagnosis")
    chat = wait_until(lambda: store.require(incident_id).chat, 30, "the post")
    approvals = service.flow.approvals

    def stop_disable(el: dict[str, Any]) -> bool:
        a = approvals.get(str(el.get("value", "")))
        return el["action_id"].startswith("approve") and a is not None \
            and a.kind == "systemd.stop_disable"

    # the alert card posted at diagnosing is edited into the full card a moment after the
    # incident is stored as awaiting approval: click once the card shows the button
    message = wait_until(lambda: _with_button(dict(standin.messages[(chat.channel, chat.ts)]),
                                              stop_disable), 30, "the Approve button")
    block_id, button = find_button(message, stop_disable)
    click = socket.send("interactive", block_actions(message, CHANNEL, ONCALL, block_id, button,
                                                     standin.base))
    assert socket.wait_ack(click)["envelope_id"] == click
    wait_until(lambda: store.require(incident_id).state in (IncidentState.VERIFIED,
                                                           IncidentState.RESUMED), 90,
               "the action to be verified")
    stops = [e for e in socket_bot["sim"].command_log()
             if e.get("tool") == "systemctl" and e["argv"][:2] == ["stop", UNIT]]
    assert len(stops) == 1

    slash = socket.send("slash_commands", {
        "token": "legacy", "team_id": "T0001", "team_domain": "stand-in", "channel_id": CHANNEL,
        "channel_name": "incidents", "user_id": ONCALL, "user_name": "ualice",
        "command": "/ir", "text": f"resolve {incident_id}", "api_app_id": "A0001",
        "response_url": f"{standin.base}/respond/77", "trigger_id": "77.trigger"})
    assert socket.wait_ack(slash)["envelope_id"] == slash
    wait_until(lambda: store.require(incident_id).state is IncidentState.RESOLVED, 30,
               "the slash resolve")
    # the flow answers once it applied the queued click (issue 34): privately, where the
    # command was typed, no longer through the slash command's response_url. The state is
    # committed before the answer goes out, and the approve click's own answer ("Approved
    # by …") is an ephemeral to the same person: wait for this one by its words
    said = f"Resolved incident {incident_id}."
    reply = wait_until(lambda: [c for c in standin.calls_of("chat.postEphemeral")
                                if c.params.get("user") == ONCALL
                                and said in str(c.params.get("text", ""))], 15,
                       "the flow's answer")
    assert reply[-1].params.get("channel") == CHANNEL, reply[-1].params


def _with_button(message: dict[str, Any],
                 match: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
    """``message`` once it carries a button ``match`` accepts; None before."""
    try:
        find_button(message, match)
    except AssertionError:
        return None
    return message
