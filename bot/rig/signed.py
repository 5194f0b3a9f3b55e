"""Send requests to our Slack endpoint signed exactly as Slack signs them (tests, demo).

Slack's v0 scheme: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{raw body}`` keyed with
the app's signing secret, in ``X-Slack-Signature``, with ``X-Slack-Request-Timestamp``.
Payload shapes follow Slack's documented interactivity and slash-command requests.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx

TEAM = {"id": "T0001", "domain": "stand-in"}


def sign(secret: str, timestamp: int | str, body: str) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class SignedSender:
    """Posts signed interactivity and slash-command requests to ``events_url``."""

    def __init__(
        self, events_url: str, signing_secret: str, response_base: str = "http://127.0.0.1:9"
    ) -> None:
        self.events_url, self.secret, self.response_base = events_url, signing_secret, response_base
        self._ids = itertools.count(1)
        self.http = httpx.Client(timeout=10.0)

    def close(self) -> None:
        self.http.close()

    def post(
        self,
        body: str,
        *,
        timestamp: int | None = None,
        signature: str | None = None,
        signed: bool = True,
    ) -> httpx.Response:
        """Send a form body; override timestamp/signature to test rejection."""
        ts = int(time.time()) if timestamp is None else timestamp
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if signed:
            headers["X-Slack-Request-Timestamp"] = str(ts)
            headers["X-Slack-Signature"] = signature or sign(self.secret, ts, body)
        return self.http.post(self.events_url, content=body.encode(), headers=headers)

    def block_action(
        self,
        user: str,
        action_id: str,
        value: str,
        *,
        channel: str = "C0INCIDENT",
        message_ts: str = "1700000000.000100",
        blocks: list[dict[str, Any]] | None = None,
        **kw: Any,
    ) -> httpx.Response:
        n = next(self._ids)
        payload = {
            **_envelope("block_actions", user),
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"{n}.trigger",
            "channel": {"id": channel, "name": "incidents"},
            "message": {"type": "message", "ts": message_ts, "text": "", "blocks": blocks or []},
            "response_url": f"{self.response_base}/respond/{n}",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "s0:0",
                    "value": value,
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        return self.post(urlencode({"payload": json.dumps(payload)}), **kw)

    def view_submission(
        self,
        user: str,
        callback_id: str,
        private_metadata: str,
        values: dict[str, dict[str, str]],
        **kw: Any,
    ) -> httpx.Response:
        """``values``: block_id → {action_id: text} for plain-text inputs."""
        state = {
            b: {a: {"type": "plain_text_input", "value": v} for a, v in acts.items()}
            for b, acts in values.items()
        }
        payload = {
            **_envelope("view_submission", user),
            "trigger_id": f"{next(self._ids)}.trigger",
            "view": {
                "id": "V000001",
                "type": "modal",
                "callback_id": callback_id,
                "team_id": TEAM["id"],
                "private_metadata": private_metadata,
                "state": {"values": state},
                "app_id": "A0001",
            },
            "response_urls": [],
        }
        return self.post(urlencode({"payload": json.dumps(payload)}), **kw)

    def slash(
        self, user: str, command: str, text: str, *, channel: str = "C0INCIDENT", **kw: Any
    ) -> httpx.Response:
        n = next(self._ids)
        form = {
            "token": "legacy",
            "team_id": TEAM["id"],
            "team_domain": TEAM["domain"],
            "channel_id": channel,
            "channel_name": "incidents",
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": "A0001",
            "response_url": f"{self.response_base}/respond/{n}",
            "trigger_id": f"{n}.trigger",
        }
        return self.post(urlencode(form), **kw)


def _envelope(kind: str, user: str) -> dict[str, Any]:
    """The fields every interaction payload Slack sends starts with."""
    return {"type": kind, "team": TEAM, "api_app_id": "A0001", "token": "legacy",
            "user": {"id": user, "username": user.lower(), "team_id": TEAM["id"]}}
