"""A local stand-in for Slack's Web API: a real HTTP server on a free loopback port.

It answers the methods the bot uses, records every call (method, arguments, token),
keeps posted messages so ``conversations.replies`` and ``chat.update`` behave, accepts
file uploads and ``response_url`` posts, and can be told to answer 429 with a
``Retry-After`` (or a 5xx) for the next N calls of a method, to answer every call with
a 5xx or a 429 for a while (an outage), to refuse connections (Slack unreachable), to
act on a call and then drop the connection unanswered (a lost response), or to act on
every call and answer it only after a delay for a while (``slow``: the client's timeout).
``on_call`` (when set) sees each Web API call as it is answered (the chaos checker).
Tests and the demo point ``slack.api_url`` at it; the bot's code cannot tell the difference.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from bot.rig.json_reply import send_json

Params = dict[str, Any]


@dataclass(frozen=True)
class Call:
    method: str  # Web API method, "upload" or "response_url"
    params: Params
    token: str | None
    at: float = field(default_factory=time.monotonic)


@dataclass
class _Fault:
    times: int
    status: int
    retry_after: float | None
    error: str


class SlackStandIn:
    def __init__(
        self, token: str | None = None, groups: dict[str, list[str]] | None = None
    ) -> None:
        self.token = token  # when set, calls without this bearer token get invalid_auth
        self.app_token: str | None = None  # the xapp- token apps.connections.open accepts
        self.socket_url = ""  # where apps.connections.open points (a Socket Mode stand-in)
        self.groups = dict(groups or {})
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Params] = {}
        self.uploads: dict[str, bytes] = {}
        self.home: dict[str, Params] = {}  # user id → the App Home view last published
        self._faults: dict[str, _Fault] = {}
        self._outage: tuple[float, _Fault] | None = None  # (until monotonic, answer)
        self._lose: dict[str, int] = {}  # method → calls to act on, then drop unanswered
        self._slow: tuple[float, float] | None = None  # (until monotonic, answer delay)
        self.on_call: Callable[[Call], None] | None = None
        self._port = 0
        self._ids = itertools.count(1)
        self._cv = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> SlackStandIn:
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), _handler_for(self))
        self._port = int(self._server.server_address[1])
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="slack-standin", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> SlackStandIn:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def base(self) -> str:
        assert self._server is not None, "stand-in not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    # --- test controls -------------------------------------------------------------------
    def rate_limit(self, method: str, times: int = 1, retry_after: float = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with 429 and ``Retry-After``."""
        self._faults[method] = _Fault(times, 429, retry_after, "ratelimited")

    def fail(
        self, method: str, times: int = 1, status: int = 500, error: str = "internal_error"
    ) -> None:
        self._faults[method] = _Fault(times, status, None, error)

    def outage(self, seconds: float, status: int = 500, retry_after: float | None = None,
               error: str = "internal_error") -> None:
        """Answer every Web API call with ``status`` (and ``Retry-After``) for ``seconds``."""
        fault = _Fault(0, status, retry_after, "ratelimited" if status == 429 else error)
        self._outage = (time.monotonic() + seconds, fault)

    def slow(self, seconds: float, delay_s: float) -> None:
        """For ``seconds``, act on every Web API call but answer it ``delay_s`` late (past
        the client's timeout: it cannot tell whether the call took effect)."""
        self._slow = (time.monotonic() + seconds, delay_s)

    def lose_response(self, method: str, times: int = 1) -> None:
        """Act on the next ``times`` calls of ``method`` but close the connection without
        an answer: the message is posted, the client never learns its ``ts``."""
        self._lose[method] = times

    def refuse_connections(self) -> None:
        """Close the listening socket: clients get "connection refused" until ``reopen``."""
        self.stop()

    def reopen(self) -> None:
        """Listen again on the same port (after ``refuse_connections``)."""
        self.start()

    def top_level(self, channel: str) -> list[Params]:
        """The channel's messages that are not thread replies, oldest first."""
        with self._cv:
            return [m for (c, _), m in sorted(self.messages.items())
                    if c == channel and not m.get("thread_ts")]

    def calls_of(self, method: str) -> list[Call]:
        with self._cv:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout_s: float = 10.0) -> list[Call]:
        """Block until ``count`` calls of ``method`` arrived; raise AssertionError if not."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while len([c for c in self.calls if c.method == method]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = sorted({c.method for c in self.calls})
                    raise AssertionError(
                        f"stand-in: fewer than {count} {method} calls (saw {seen})"
                    )
                self._cv.wait(left)
            return [c for c in self.calls if c.method == method]

    # --- request handling ------------------------------------------------------------------
    def handle(
        self, path: str, params: Params, raw: bytes, token: str | None
    ) -> tuple[int, Params, dict[str, str]]:
        """One request → (status, JSON body, extra headers)."""
        if path.startswith("/upload/"):
            self.uploads[path.rsplit("/", 1)[-1]] = raw
            self._record(
                Call("upload", {"file_id": path.rsplit("/", 1)[-1], "size": len(raw)}, token)
            )
            return 200, {"ok": True}, {}
        if path.startswith("/respond/"):
            self._record(Call("response_url", params, token))
            return 200, {"ok": True}, {}
        method = path.removeprefix("/api/")
        self._record(Call(method, params, token))
        fault = self._take_fault(method) or self._outage_fault()
        if fault is not None:
            headers = (
                {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            )
            return fault.status, {"ok": False, "error": fault.error}, headers
        wanted = self.app_token if method == "apps.connections.open" else self.token
        if wanted is not None and token != wanted:
            return 200, {"ok": False, "error": "invalid_auth"}, {}
        answer = self._methods().get(method)
        if answer is None:
            return 200, {"ok": False, "error": "unknown_method"}, {}
        body = {"ok": True, **answer(params)}
        if self.on_call is not None:
            self.on_call(Call(method, params, token))
        slow = self._slow
        if slow is not None and time.monotonic() < slow[0]:
            time.sleep(slow[1])
        return (LOST if self._take_lost(method) else 200), body, {}

    def _record(self, call: Call) -> None:
        with self._cv:
            self.calls.append(call)
            self._cv.notify_all()

    def _take_fault(self, method: str) -> _Fault | None:
        with self._cv:
            fault = self._faults.get(method)
            if fault is None or fault.times <= 0:
                return None
            fault.times -= 1
            return fault

    def _outage_fault(self) -> _Fault | None:
        outage = self._outage
        return outage[1] if outage is not None and time.monotonic() < outage[0] else None

    def _take_lost(self, method: str) -> bool:
        with self._cv:
            left = self._lose.get(method, 0)
            if left <= 0:
                return False
            self._lose[method] = left - 1
            return True

    def _methods(self) -> dict[str, Callable[[Params], Params]]:
        return {
            "auth.test": lambda p: {
                "user_id": "UBOT",
                "bot_id": "BBOT",
                "team_id": "T0001",
                "team": "stand-in",
                "url": f"{self.base}/",
                "user": "incident-bot",
            },
            "chat.postMessage": self._post,
            "chat.update": self._update,
            "chat.postEphemeral": lambda p: {"message_ts": self._ts()},
            "views.open": lambda p: {"view": {"id": f"V{next(self._ids):06d}"}},
            "views.publish": self._publish_home,
            "usergroups.users.list": lambda p: {
                "users": self.groups.get(str(p.get("usergroup")), [])
            },
            "files.getUploadURLExternal": self._upload_url,
            "files.completeUploadExternal": lambda p: {"files": _as_list(p.get("files"))},
            "conversations.replies": self._replies,
            "conversations.history": self._history,
            "apps.connections.open": lambda p: {"url": self.socket_url},
        }

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._ids):06d}"

    def _post(self, p: Params) -> Params:
        ts, channel = self._ts(), str(p.get("channel", ""))
        message = {
            "type": "message",
            "ts": ts,
            "text": p.get("text", ""),
            "blocks": _as_list(p.get("blocks")),
            "user": "UBOT",
            "bot_id": "BBOT",
        }
        if p.get("thread_ts"):
            message["thread_ts"] = str(p["thread_ts"])
        if isinstance(p.get("metadata"), dict):
            message["metadata"] = p["metadata"]
        with self._cv:
            self.messages[(channel, ts)] = message
        return {"channel": channel, "ts": ts, "message": message}

    def _update(self, p: Params) -> Params:
        key = (str(p.get("channel", "")), str(p.get("ts", "")))
        with self._cv:
            if key not in self.messages:
                return {"ok": False, "error": "message_not_found"}
            self.messages[key].update(text=p.get("text", ""), blocks=_as_list(p.get("blocks")))
            if isinstance(p.get("metadata"), dict):
                self.messages[key]["metadata"] = p["metadata"]
        return {"channel": key[0], "ts": key[1], "text": p.get("text", "")}

    def _publish_home(self, p: Params) -> Params:
        view = p.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                view = None
        if not isinstance(view, dict) or not p.get("user_id"):
            return {"ok": False, "error": "invalid_arguments"}
        with self._cv:
            self.home[str(p["user_id"])] = view
        return {"view": {"id": f"V{next(self._ids):06d}", "type": view.get("type", "home")}}

    def _upload_url(self, p: Params) -> Params:
        file_id = f"F{next(self._ids):08d}"
        return {"upload_url": f"{self.base}/upload/{file_id}", "file_id": file_id}

    def _replies(self, p: Params) -> Params:
        channel, ts = str(p.get("channel", "")), str(p.get("ts", ""))
        with self._cv:
            parent = self.messages.get((channel, ts))
            replies = [
                m
                for (c, _), m in sorted(self.messages.items())
                if c == channel and m.get("thread_ts") == ts
            ]
        if parent is None:
            return {"ok": False, "error": "thread_not_found"}
        return _page([parent, *replies], p)

    def _history(self, p: Params) -> Params:
        """The channel's top-level messages, newest first, from ``oldest`` on."""
        channel, oldest = str(p.get("channel", "")), float(p.get("oldest") or 0)
        found = [m for m in self.top_level(channel) if float(m["ts"]) >= oldest]
        return _page(found[::-1], p)


def _page(messages: list[Params], p: Params) -> Params:
    """One page of ``messages`` as Slack pages them: at most ``limit`` (default 100, at
    most 999), ``has_more`` and ``response_metadata.next_cursor`` (opaque, here the
    offset) for the next call, so a reader that stops at one page misses the rest."""
    try:
        start = int(base64.b64decode(str(p.get("cursor") or "")).decode() or 0)
        limit = min(max(int(p.get("limit") or 100), 1), 999)
    except ValueError:
        return {"ok": False, "error": "invalid_cursor"}
    rest = messages[start + limit:]
    cursor = base64.b64encode(str(start + limit).encode()).decode() if rest else ""
    return {"messages": messages[start:start + limit], "has_more": bool(rest),
            "response_metadata": {"next_cursor": cursor}}


LOST = 0  # a handled call whose connection is closed without an answer


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return list(value) if isinstance(value, list) else []


def _parse(content_type: str, raw: bytes, query: str) -> Params:
    params: Params = dict(parse_qsl(query))
    if not raw:
        return params
    if "json" in content_type:
        try:
            body = json.loads(raw)
        except ValueError:
            return params
        return {**params, **body} if isinstance(body, dict) else params
    if "form" in content_type:
        params.update(parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
    return params


def _handler_for(standin: SlackStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._serve(b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self._serve(self.rfile.read(length) if length else b"")

        def _serve(self, raw: bytes) -> None:
            url = urlsplit(self.path)
            params = _parse(self.headers.get("Content-Type", ""), raw, url.query)
            auth = self.headers.get("Authorization", "")
            token = (
                auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else params.get("token")
            )
            status, body, headers = standin.handle(url.path, params, raw, token)
            if status == LOST:
                self.close_connection = True
                return
            try:
                send_json(self, status, body, headers, "application/json; charset=utf-8")
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (``slow``)
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
            return

    return Handler
