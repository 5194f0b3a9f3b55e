"""Replay-proof Slack (issue 39), through a real ``serve`` on a real Redis, the seed host
behind a real sshd, Slack a stand-in that signs nothing: requests are signed here exactly
as Slack signs them, then sent again byte for byte.

Before: an approver's ``/ir silence gpu-01 vm_restart 2h`` replayed within Slack's five
minutes, after an operator removed the silence, created it again; and a click was never
held against the message its approval belongs to.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from bot.core import strings
from bot.domain.lifecycle import IncidentState
from bot.rig.signed import sign
from bot.sim.sshd import SimHost
from storage.silences import SilenceStore
from tests.fixtures.alerts import am_alert, am_payload
from tests.fixtures.slack_payloads import block_actions, find_button, form
from tests.helpers.ground import Ground
from tests.helpers.serve_process import CHANNEL, SIGNING_SECRET, wait_until

S = IncidentState
RECONCILE = {"every_s": 1.0, "open_s": 30.0, "diagnosing_s": 60.0, "acting_s": 60.0}
UNIT = "vllm-kimi-k25-int4.service"
RLO = "\u202e"


@pytest.fixture
def ground(tmp_path: Path, sim_factory: Callable[..., SimHost]) -> Iterator[Ground]:
    rig = Ground.start(tmp_path, sim_factory("seed"), RECONCILE,
                       extra={"remediation": {"settle_s": 0.3}})
    try:
        yield rig
    finally:
        rig.stop()


class Wire:
    """One signed request, kept so it can be sent again exactly as it went."""

    def __init__(self, url: str, body: str, headers: dict[str, str] | None = None) -> None:
        stamp = str(int(time.time()))
        self.url, self.body = url, body.encode()
        self.headers = {"Content-Type": "application/x-www-form-urlencoded",
                        "X-Slack-Request-Timestamp": stamp,
                        "X-Slack-Signature": sign(SIGNING_SECRET, stamp, body),
                        **(headers or {})}

    def send(self) -> httpx.Response:
        return httpx.post(self.url, content=self.body, headers=self.headers, timeout=15)


def slash_body(user: str, text: str) -> str:
    return urlencode({"token": "legacy", "team_id": "T0001", "channel_id": CHANNEL,
                      "user_id": user, "command": "/ir", "text": text,
                      "response_url": "http://127.0.0.1:9/respond/1", "trigger_id": "1.trigger"})


def replayed(answer: httpx.Response) -> bool:
    return (answer.status_code == 401 and answer.json()["error"] == strings.SLACK_REPLAYED
            and answer.headers.get("X-Slack-No-Retry") == "1")


def test_a_replayed_slash_command_does_not_silence_again(ground: Ground) -> None:
    silences = SilenceStore(ground.store.redis)
    wire = Wire(f"{ground.serve.url}/slack/events",
                slash_body("UALICE", "silence gpu-01 vm_restart 2h"))
    assert wire.send().status_code == 200
    assert wait_until(lambda: silences.active_for("gpu-01", "vm_restart") is not None, 15)
    assert silences.remove("gpu-01", "vm_restart", "operator")  # an operator lifts it
    answer = wire.send()  # the same bytes, the same signature, within the window
    assert replayed(answer), (answer.status_code, answer.text)
    time.sleep(1.0)  # the listener would have run by now: nothing may change
    assert silences.active_for("gpu-01", "vm_restart") is None
    metrics = httpx.get(f"{ground.serve.url}/metrics", timeout=10).text
    assert 'incident_bot_slack_replays_total{kind="slash_command"} 1.0' in metrics


def test_a_replayed_click_and_modal_submission_act_once(ground: Ground) -> None:
    assert ground.alert().status_code == 200
    incident = ground.wait_incident(lambda i: i.state is S.AWAITING_APPROVAL
                                    and i.chat is not None, 60, "awaiting approval")
    assert wait_until(lambda: ground.card_shows(incident.id, '"approve'), 30)
    card = ground.card(incident.id)
    block_id, button = find_button(card, lambda el: el.get("action_id", "").startswith("deny"))
    deny = Wire(f"{ground.serve.url}/slack/events",
                form(block_actions(card, CHANNEL, "UALICE", block_id, button,
                                   ground.standin.base)))
    assert deny.send().status_code == 200  # opens the modal
    assert replayed(deny.send())
    assert wait_until(lambda: len(ground.standin.calls_of("views.open")) == 1, 15)
    view = ground.standin.calls_of("views.open")[0].params["view"]
    view = json.loads(view) if isinstance(view, str) else view
    submit = Wire(f"{ground.serve.url}/slack/events", urlencode({"payload": json.dumps({
        "type": "view_submission", "team": {"id": "T0001"}, "user": {"id": "UALICE"},
        "api_app_id": "A0001", "token": "legacy", "trigger_id": "9.trigger",
        "view": {"id": "V1", "type": "modal", "callback_id": view["callback_id"],
                 "private_metadata": view["private_metadata"], "team_id": "T0001",
                 "state": {"values": {"reason": {"reason_input": {
                     "type": "plain_text_input", "value": "not now, testing"}}}}}})}))
    assert submit.send().status_code == 200
    assert replayed(submit.send())
    assert wait_until(lambda: ground.store.require(incident.id).state is S.DENIED, 30), \
        ground.logs()
    assert wait_until(lambda: len(ground.ephemerals()) == 1, 15), ground.ephemerals()
    time.sleep(1.0)  # a second handling of the submission would have answered by now
    assert len(ground.ephemerals()) == 1 and len(ground.standin.calls_of("views.open")) == 1
    denied = [e for e in ground.store.audit.timeline(incident.id)
              if e.action == "approval.denied"]
    assert len(denied) == 1


def test_an_events_api_retry_of_a_handled_event_gets_its_200(ground: Ground) -> None:
    body = json.dumps({"type": "event_callback", "team_id": "T0001", "api_app_id": "A0001",
                       "event": {"type": "app_mention", "user": "UALICE", "text": "<@UBOT> hi",
                                 "channel": CHANNEL, "ts": "1.000001"},
                       "event_id": "Ev01", "event_time": int(time.time())})
    wire = Wire(f"{ground.serve.url}/slack/events", body,
                {"Content-Type": "application/json"})
    assert wire.send().status_code == 200
    retry = Wire(wire.url, body, {"Content-Type": "application/json"})
    retry.headers = {**wire.headers, "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason":
                     "http_timeout"}
    answer = retry.send()
    assert answer.status_code == 200 and answer.content == b""
    assert replayed(wire.send())  # without Slack's retry header: a replay


def two_cards(ground: Ground) -> tuple[str, str]:
    assert ground.alert().status_code == 200
    assert ground.alert("GpuHostFilesystemFull").status_code == 200
    for kind in ("vram_idle", "disk_full"):
        ground.wait_incident(lambda i, k=kind: i.kind == k and i.chat is not None  # type: ignore[misc]
                             and i.diagnosis is not None, 60, kind)
    held = next(i for i in ground.incidents() if i.kind == "vram_idle")
    other = next(i for i in ground.incidents() if i.kind == "disk_full")
    assert wait_until(lambda: ground.card_shows(held.id, '"approve'), 30)
    return held.id, other.id


def test_a_click_is_held_against_the_message_its_approval_is_on(ground: Ground) -> None:
    held, other = two_cards(ground)
    card, elsewhere = ground.card(held), ground.card(other)
    # the Approve of ``held`` as if it had been on ``other``'s message
    block_id, button = find_button(card, lambda el: el.get("action_id", "").startswith("approve"))
    forged: dict[str, Any] = block_actions(elsewhere, CHANNEL, "UALICE", block_id, button,
                                           ground.standin.base)
    assert Wire(f"{ground.serve.url}/slack/events", form(forged)).send().status_code == 200
    expect = strings.CLICK_OTHER_MESSAGE.format(id=held)
    assert wait_until(lambda: expect in ground.ephemerals(), 15), ground.ephemerals()
    refused = [e.detail for e in ground.store.audit.timeline(held)
               if e.action == "click.refused"]
    assert refused and refused[0]["ts"] == elsewhere["ts"]
    # the incident's own Ack, from the other card: refused too
    block_id, ack = find_button(card, lambda el: el.get("action_id", "").startswith(
        "incident_ack"))
    forged = block_actions(elsewhere, CHANNEL, "UALICE", block_id, ack, ground.standin.base)
    assert Wire(f"{ground.serve.url}/slack/events", form(forged)).send().status_code == 200
    assert wait_until(lambda: ground.ephemerals().count(expect) == 2, 15), ground.ephemerals()
    assert ground.store.require(held).acked_by == ""
    assert ground.store.require(held).state is S.AWAITING_APPROVAL
    # from its own message the same click goes through, and the action runs once
    assert ground.click(card, "approve").status_code == 200
    assert wait_until(lambda: ground.settled(held) and ground.store.require(held).state
                      in (S.VERIFIED, S.RESOLVED), 60), ground.logs()
    stops = [e for e in ground.sim.command_log()
             if e.get("tool") == "systemctl" and e["argv"][:2] == ["stop", UNIT]]
    assert len(stops) == 1


def test_an_alerts_bidi_override_reaches_slack_spelled_out(ground: Ground) -> None:
    """U+202E in the alert's summary and labels reached Slack raw in the alert card, so a
    line could read backwards (issue 39); every post and edit now spells it out."""
    alert = am_alert("gpu-01", team=f"ml{RLO}ops")
    alert["annotations"]["summary"] = f"GPU memory held by {RLO}10-upg"
    assert ground.serve.post_alert(am_payload(alert)).status_code == 200
    incident = ground.wait_incident(lambda i: i.state is S.AWAITING_APPROVAL
                                    and i.chat is not None, 60, "awaiting approval")
    assert wait_until(lambda: ground.card_shows(incident.id, '"approve'), 30)
    sent = [c.params for c in ground.standin.calls_of("chat.postMessage")
            + ground.standin.calls_of("chat.update")]
    raw = json.dumps(sent, ensure_ascii=False)
    assert RLO not in raw
    assert "\\\\u202e10-upg" in raw  # the alert card said it, spelled out
    assert len(ground.parents()) == 1
