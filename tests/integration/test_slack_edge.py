"""``/slack/events`` refuses in order: size, then signature, then shape; always 4xx JSON."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import urlencode

import pytest

from bot.chat import slack_edge
from bot.core import strings
from bot.rig.signed import sign
from tests.fixtures.slack import SIGNING_SECRET, SlackRig
from tests.helpers.hostile import chunked_post, connect, read_answer

ODD_PAYLOADS: list[object] = [
    [], "text", 7, None, {"type": "block_actions", "user": 5},
    {"type": "block_actions", "actions": "approve"}, {"type": "block_actions", "actions": [1]},
    {"type": "block_actions", "user": {"id": 5}}, {"type": "view_submission", "view": "x"},
    {"type": "view_submission", "view": {"callback_id": ["deny"]}},
    {"type": "event_callback", "event": None}, {"type": "event_callback", "event": []},
    {"type": ["block_actions"]}, {"team": 1.5}, {"authorizations": [None]},
    {"response_urls": ["x"]}, {"type": "block_actions", "container": 3},
]


def signed_post(rig: SlackRig, body: str, content_type: str = "application/x-www-form-urlencoded"
                ) -> tuple[int, dict[str, object]]:
    assert rig.sender is not None
    ts = int(time.time())
    response = rig.sender.http.post(
        rig.sender.events_url, content=body.encode(),
        headers={"Content-Type": content_type, "X-Slack-Request-Timestamp": str(ts),
                 "X-Slack-Signature": sign(SIGNING_SECRET, ts, body)})
    return response.status_code, response.json() if response.content else {}


def test_bad_timestamp_is_401_not_500(slack_rig: SlackRig) -> None:
    assert slack_rig.sender is not None
    response = slack_rig.sender.http.post(
        slack_rig.sender.events_url, content=b"x",
        headers={"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=00"})
    assert response.status_code == 401
    assert response.json() == {"error": strings.SLACK_BAD_TIMESTAMP}


def test_unsigned_payload_is_refused_before_parsing(slack_rig: SlackRig) -> None:
    assert slack_rig.sender is not None
    response = slack_rig.sender.post("payload=not-json", signed=False)
    assert response.status_code == 401 and response.json() == {"error": strings.SLACK_UNSIGNED}


@pytest.mark.parametrize("body", ["payload=not-json", "payload=%7B%22a%22%3A", "{not json",
                                  "payload=" + "[" * 100_000, "payload=1" + "0" * 5000])
def test_signed_bad_json_is_400(slack_rig: SlackRig, body: str) -> None:
    status, answer = signed_post(slack_rig, body)
    assert status == 400 and "not valid JSON" in str(answer["error"])


@pytest.mark.parametrize("payload", ODD_PAYLOADS, ids=[json.dumps(p)[:30] for p in ODD_PAYLOADS])
def test_signed_odd_shapes_are_4xx(slack_rig: SlackRig, payload: object) -> None:
    for body in (urlencode({"payload": json.dumps(payload)}), json.dumps(payload)):
        status, answer = signed_post(slack_rig, body, "application/json"
                                     if body.startswith(("{", "[")) else
                                     "application/x-www-form-urlencoded")
        assert 400 <= status < 500, (body, status, answer)


def test_signed_not_utf8_is_400(slack_rig: SlackRig) -> None:
    assert slack_rig.sender is not None
    ts, body = int(time.time()), b"text=\xff\xfe"
    sig = slack_edge.verify(SIGNING_SECRET, {}, body, ts)  # unsigned: refused first
    assert sig is not None and sig.status == 401
    mac = hmac.new(SIGNING_SECRET.encode(), b"v0:%d:" % ts + body, hashlib.sha256).hexdigest()
    response = slack_rig.sender.http.post(
        slack_rig.sender.events_url, content=body,
        headers={"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": "v0=" + mac})
    assert response.status_code == 400 and response.json() == {"error": strings.SLACK_NOT_UTF8}


def test_declared_length_over_cap_is_413_unread(slack_rig: SlackRig) -> None:
    assert slack_rig.served is not None
    with connect(slack_rig.served.url) as sock:
        sock.sendall(b"POST /slack/events HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 104857600\r\n\r\n")
        status, body = read_answer(sock)
    assert status == 413 and b"limit" in body


def test_chunked_over_cap_is_413_without_reading_it_all(slack_rig: SlackRig) -> None:
    assert slack_rig.served is not None
    total = 64 * 1024 * 1024
    status, _, sent = chunked_post(slack_rig.served.url, "/slack/events", total)
    assert status == 413 and sent < total, (status, sent)


def test_secret_is_required() -> None:
    assert slack_edge.verify("", {"x-slack-request-timestamp": "1",
                                  "x-slack-signature": sign("", 1, "")}, b"", 1) is not None


def test_our_own_bug_is_a_500_with_an_error_id(slack_rig: SlackRig, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    from bot.chat import slash

    def broken(text: str, command: str = "/ir") -> slash.SlashCommand:
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(slash, "parse", broken)
    assert slack_rig.sender is not None
    response = slack_rig.sender.slash("UALICE", "/ir", "status")
    assert response.status_code == 500
    error = response.json()["error"]
    assert "error id" in error
    assert error.split("error id ")[1][:12] in caplog.text
