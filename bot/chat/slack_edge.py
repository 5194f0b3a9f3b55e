"""The door of ``/slack/events``: size, then signature, then shape, before Bolt sees a byte.

Bolt verifies the signature only after it has read the whole body and parsed it, so an
unsigned 100 MB chunked upload was buffered in full and ``payload=not-json`` or a
non-numeric timestamp raised inside Bolt (a 500). Here the order is fixed: the body is
read under a cap (declared and streamed), Slack's v0 signature is checked over the raw
bytes within the timestamp window, and only a signed body is parsed, exactly as Bolt
will parse it, and its envelope checked for the types Bolt and our listeners rely on.
Every refusal is a 4xx ``EdgeRefusal`` with a reason; nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from bot.core import strings

MAX_SKEW_S = 300  # Slack's own window: a request older than five minutes is a replay
OBJECT_FIELDS = ("event", "view", "container", "message", "previous_message", "item",
                 "assistant_thread", "function_data")
ID_FIELDS = ("enterprise", "team", "user", "channel")
LIST_FIELDS = ("authorizations", "actions", "response_urls")
# only what Bolt's matchers compare with a regex or our listeners read as text; elsewhere
# Slack's own payloads use objects for ``text`` and the like, and Bolt compares with ==
TEXT_FIELDS = ("type", "action_id", "callback_id", "command", "user_id", "channel_id",
               "team_id", "trigger_id", "response_url", "private_metadata")


@dataclass(frozen=True)
class EdgeRefusal:
    status: int
    reason: str


class ShapeError(ValueError):
    """A signed body whose shape we cannot use (HTTP 400 with this reason)."""


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> EdgeRefusal | None:
    """Slack's v0 scheme: ``v0=`` + HMAC-SHA256 of ``v0:{ts}:{raw body}``, ts within 5 min."""
    if not secret:  # an empty key would make every forged signature "valid"
        return EdgeRefusal(401, strings.SLACK_BAD_SIGNATURE)
    stamp = headers.get("x-slack-request-timestamp")
    given = headers.get("x-slack-signature")
    if not stamp or not given:
        return EdgeRefusal(401, strings.SLACK_UNSIGNED)
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        return EdgeRefusal(401, strings.SLACK_BAD_TIMESTAMP)
    if abs(now - int(stamp)) > MAX_SKEW_S:
        return EdgeRefusal(401, strings.SLACK_STALE)
    base = b"v0:" + stamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
        return EdgeRefusal(401, strings.SLACK_BAD_SIGNATURE)
    return None


def parse(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The body as Bolt's ``parse_body`` will read it, or ShapeError; never anything else."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ShapeError(strings.SLACK_NOT_UTF8) from None
    if not text:
        return {}
    media = (content_type or "").split(";")[0].strip()
    if media == "application/json" or text.startswith("{"):
        return _envelope(_json(text, "body"))
    if "payload" in text:
        payload = dict(parse_qsl(text, keep_blank_values=True)).get("payload")
        return {} if payload is None else _envelope(_json(payload, "payload"))
    return dict(parse_qsl(text, keep_blank_values=True))


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, int-string limit, too deep
        raise ShapeError(strings.SLACK_BAD_JSON.format(where=where)) from None


def _envelope(data: Any, depth: int = 0) -> dict[str, Any]:
    """The envelope fields Bolt's extractors and our listeners index, with Slack's types."""
    if not isinstance(data, dict):
        raise ShapeError(strings.SLACK_BAD_SHAPE.format(field="payload", want="an object"))
    for name in OBJECT_FIELDS:
        if name in data:
            inner = data[name]
            if not isinstance(inner, dict):
                raise ShapeError(strings.SLACK_BAD_SHAPE.format(field=name, want="an object"))
            if depth < 3:
                _envelope(inner, depth + 1)
    for name in ID_FIELDS:
        _id_field(data, name)
    for name in LIST_FIELDS:
        if name in data and not (isinstance(data[name], list)
                                 and all(isinstance(x, dict) for x in data[name])):
            raise ShapeError(strings.SLACK_BAD_SHAPE.format(field=name,
                                                            want="a list of objects"))
        for inner in data.get(name) or ():
            if depth < 3:
                _envelope(inner, depth + 1)
    for name in TEXT_FIELDS:
        if data.get(name) is not None and not isinstance(data[name], str):
            raise ShapeError(strings.SLACK_BAD_SHAPE.format(field=name, want="a string"))
    if depth == 0:
        _what_bolt_indexes(data)
    return data


def _what_bolt_indexes(data: dict[str, Any]) -> None:
    """Bolt's matchers index these without a guard (``payload_utils``): a KeyError there is
    a 500, so a payload of that type without them is refused here."""
    kind, view = data.get("type"), data.get("view") or {}
    needs: list[tuple[str, bool]] = []
    if kind in ("block_actions", "interactive_message") and (
            "actions" in data or "callback_id" in data):
        actions = data.get("actions") or [{}]
        needs.append(("actions", bool(data.get("actions"))))
        if kind == "block_actions":
            needs.append(("actions[0].action_id", isinstance(actions[0].get("action_id"), str)))
    if kind == "view_submission" and "callback_id" in view:
        needs.append(("view.type", isinstance(view.get("type"), str)))
    if kind == "workflow_step_edit" or (kind == "view_submission"
                                        and view.get("type") == "workflow_step"):
        needs.append(("workflow_step", isinstance(data.get("workflow_step"), dict)))
    for field, present in needs:
        if not present:
            raise ShapeError(strings.SLACK_BAD_SHAPE.format(field=field, want="present"))


def _id_field(data: dict[str, Any], name: str) -> None:
    value = data.get(name)
    if value is None or isinstance(value, str):
        return
    if not isinstance(value, dict) or not isinstance(value.get("id", ""), str | None):
        raise ShapeError(strings.SLACK_BAD_SHAPE.format(field=name,
                                                        want="a string or an object with an id"))
