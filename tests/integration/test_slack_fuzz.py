"""Hypothesis against ``/slack/events``: signed payloads of every shape Slack sends, and many
it never does, must never get a 5xx (a 4xx names the field; Bolt answers the rest)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.chat import slack_edge
from bot.chat.blockkit import DENY_CALLBACK
from bot.rig.signed import sign
from tests.fixtures.slack import SIGNING_SECRET, SlackRig

EXAMPLES = 1000
FORM = "application/x-www-form-urlencoded"

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(
    max_size=20)
anything = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=10)
users = st.sampled_from(["UALICE", "UMALLORY", "UBOB", "", "U" + "9" * 40])
user_field = st.fixed_dictionaries({"id": users | anything}) | users | anything
action_ids = st.sampled_from(["approve", "approve:1", "revert", "deny", "deny:2", "incident_ack",
                              "incident_resolve", "incident_snooze:3", "incident_retry",
                              "incident_escalate", "evidence", "nothing_we_know"])
values = st.sampled_from(["", "INC-1", "INC-1|600", "ap-0000", "x" * 300, "INC-1|99999999"]) | (
    st.text(max_size=40))
action = st.fixed_dictionaries({"action_id": action_ids, "value": values | anything},
                               optional={"type": st.just("button"), "block_id": st.text()})
container = st.fixed_dictionaries({"channel_id": st.text(max_size=12) | anything,
                                   "message_ts": st.text(max_size=20)})
block_actions = st.fixed_dictionaries(
    {"type": st.just("block_actions"), "user": user_field,
     "actions": st.lists(action, max_size=2) | anything},
    optional={"container": container | anything, "channel": user_field,
              "trigger_id": st.text(max_size=10) | anything,
              "response_url": st.just("http://127.0.0.1:9/r"), "team": user_field,
              "message": anything})
view = st.fixed_dictionaries(
    {"callback_id": st.sampled_from([DENY_CALLBACK, "other"]) | anything},
    optional={"private_metadata": st.text(max_size=60) | anything | st.builds(
        json.dumps, st.dictionaries(st.sampled_from(["approval_id", "channel", "ts"]),
                                    st.text(max_size=10) | anything)),
        "state": anything | st.just({"values": {"reason": {"reason_input": {"value": "because"}}}}),
        "id": st.text(max_size=8)})
view_submission = st.fixed_dictionaries(
    {"type": st.sampled_from(["view_submission", "view_closed"]), "user": user_field,
     "view": view | anything}, optional={"team": user_field, "response_urls": anything})
event = st.fixed_dictionaries(
    {"type": st.sampled_from(["app_mention", "app_home_opened", "message", "reaction_added"])},
    optional={"user": users | anything, "channel": st.text(max_size=12) | anything,
              "text": st.text(max_size=40), "tab": st.just("home"), "item": anything})
event_callback = st.fixed_dictionaries(
    {"type": st.just("event_callback"), "event": event | anything},
    optional={"team_id": st.text(max_size=10) | anything, "authorizations": anything,
              "is_ext_shared_channel": st.booleans(), "enterprise_id": anything})
other = st.fixed_dictionaries({"type": st.sampled_from(["url_verification", "shortcut",
                                                        "message_action", "block_suggestion",
                                                        "app_rate_limited", "?"])},
                              optional={"challenge": anything, "callback_id": anything,
                                        "user": user_field})
slash_text = st.sampled_from(["", "help", "status", "job ex-000000000000", "snooze INC-1 30d",
                              "silence gpu-01 gpu_ecc 30d", "diag 'bad host", "ack"]) | st.text(
    max_size=40)
slash_form = st.fixed_dictionaries(
    {"command": st.sampled_from(["/ir", "/other"]), "text": slash_text},
    optional={"user_id": users, "channel_id": st.text(max_size=12), "team_id": st.text(),
              "response_url": st.just("http://127.0.0.1:9/r"), "trigger_id": st.text()})


def _encodings(payload: Any) -> st.SearchStrategy[tuple[str, str]]:
    text = json.dumps(payload)
    return st.sampled_from([(urlencode({"payload": text}), FORM), (text, "application/json"),
                            ("payload=" + text, FORM)])


bodies: st.SearchStrategy[tuple[str, str]] = st.one_of(
    (block_actions | view_submission | event_callback | other | anything).flatmap(_encodings),
    slash_form.map(lambda form: (urlencode(form), FORM)),
    st.text(max_size=80).map(lambda t: (t, FORM)),
    st.text(max_size=80).map(lambda t: ("payload=" + t, FORM)),
    st.text(max_size=80).map(lambda t: (t, "application/json")),
)


def test_signed_payloads_of_every_shape_never_get_a_5xx(
        slack_rig: SlackRig, capsys: pytest.CaptureFixture[str]) -> None:
    sender = slack_rig.sender
    assert sender is not None
    statuses: dict[int, int] = {}

    @given(body=bodies)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def post(body: tuple[str, str]) -> None:
        text, content_type = body
        ts = int(time.time())
        response = sender.http.post(sender.events_url, content=text.encode(), headers={
            "Content-Type": content_type, "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": sign(SIGNING_SECRET, ts, text)})
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (text[:300], response.status_code, response.text)

    post()
    slack_rig.drain()
    with capsys.disabled():
        print(f"\nslack fuzz: {sum(statuses.values())} signed requests, statuses {statuses}")
    assert sum(statuses.values()) >= EXAMPLES and statuses.get(200, 0) > 0
    assert any(400 <= s < 500 for s in statuses)


def test_real_slack_payloads_pass_the_edge() -> None:
    """What Slack really sent (tests/fixtures/real/slack) is never refused for its shape."""
    real = Path(__file__).parents[1] / "fixtures" / "real" / "slack"
    payload = json.loads((real / "block_actions_button.json").read_text())
    body = urlencode({"payload": json.dumps(payload)}).encode()
    assert slack_edge.parse(body, FORM)["actions"][0]["action_id"]
    frames = json.loads((real / "socket_mode_frames.json").read_text())
    inner = [f["payload"] for f in frames.values() if isinstance(f.get("payload"), dict)]
    assert inner
    for item in inner:
        assert slack_edge.parse(json.dumps(item).encode(), "application/json") == item
