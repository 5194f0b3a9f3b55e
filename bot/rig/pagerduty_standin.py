"""A local stand-in for PagerDuty's Events API v2: a real HTTP server on a loopback port.

``POST /v2/enqueue`` answers as PagerDuty documents it: 202 with ``{"status": "success",
"message": "Event processed", "dedup_key": ...}``; 400 with ``errors`` for an event that
breaks the contract (routing key, action, dedup key, trigger payload); and, when told to,
429 (with or without ``Retry-After``) or a 5xx for the next N events, or nothing at all
(``down()`` closes the port until ``up()``). Accepted events are recorded in order, and
``alerts`` folds them by dedup key the way PagerDuty does (trigger → acknowledged →
resolved). Tests point ``paging.pagerduty.url`` at ``url``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.rig.json_reply import send_json

ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")
STATUS_OF = {"trigger": "triggered", "acknowledge": "acknowledged", "resolve": "resolved"}


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    at: float


@dataclass
class _Answer:
    times: int
    status: int
    retry_after: str | None


def problems(body: Any) -> list[str]:
    """What PagerDuty would reject in this event (empty: valid)."""
    if not isinstance(body, dict):
        return ["Event object is invalid"]
    errs = []
    if not isinstance(body.get("routing_key"), str) or len(body["routing_key"]) != 32:
        errs.append("'routing_key' is invalid (32 characters)")
    action = body.get("event_action")
    if action not in ACTIONS:
        errs.append("'event_action' is invalid (trigger, acknowledge, resolve)")
    if action in ("acknowledge", "resolve") and not body.get("dedup_key"):
        errs.append("'dedup_key' is missing (required for acknowledge and resolve)")
    if action == "trigger":
        errs += _payload_problems(body.get("payload"))
    return errs


def _payload_problems(payload: Any) -> list[str]:
    if not isinstance(payload, dict):
        return ["'payload' is missing or invalid"]
    errs = []
    if not payload.get("summary") or len(str(payload["summary"])) > 1024:
        errs.append("'payload.summary' is missing or longer than 1024 characters")
    if not payload.get("source"):
        errs.append("'payload.source' is missing")
    if payload.get("severity") not in SEVERITIES:
        errs.append("'payload.severity' is invalid (critical, error, warning, info)")
    return errs


class PagerDutyStandIn:
    def __init__(self, port: int = 0) -> None:
        self.events: list[Received] = []  # accepted, in order
        self.requests = 0
        self._faults: list[_Answer] = []
        self._cv = threading.Condition()
        self._port = port
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> PagerDutyStandIn:
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), _handler_for(self))
        self._port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    down = stop  # connection refused until ``up``

    def up(self) -> PagerDutyStandIn:
        return self.start()  # the same port again

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v2/enqueue"

    def fail(self, status: int, times: int = 1, retry_after: str | None = None) -> None:
        """The next ``times`` events get ``status`` (429 or 5xx) and are not recorded."""
        with self._cv:
            self._faults.append(_Answer(times, status, retry_after))

    def actions(self, dedup_key: str) -> list[str]:
        with self._cv:
            return [r.body["event_action"] for r in self.events
                    if r.body.get("dedup_key") == dedup_key]

    def alerts(self) -> dict[str, str]:
        """dedup key -> its status after every accepted event, as PagerDuty folds them."""
        out: dict[str, str] = {}
        with self._cv:
            for r in self.events:
                key, action = str(r.body.get("dedup_key")), r.body["event_action"]
                if action == "trigger" and out.get(key) in (None, "resolved"):
                    out[key] = "triggered"
                elif action != "trigger" and key in out and out[key] != "resolved":
                    out[key] = STATUS_OF[action]
        return out

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while len(self.events) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.events)} events, wanted {count}")
                self._cv.wait(left)
            return list(self.events)

    def handle(self, raw: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._cv:
            self.requests += 1
            fault = self._faults[0] if self._faults else None
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.pop(0)
                headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
                return fault.status, {"status": "error", "message": "try again"}, headers
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        errs = problems(body)
        if errs:
            return 400, {"status": "invalid event", "message": "Event object is invalid",
                         "errors": errs}, {}
        key = str(body.get("dedup_key") or f"standin-{self.requests}")
        with self._cv:
            self.events.append(Received({**body, "dedup_key": key}, time.time()))
            self._cv.notify_all()
        return 202, {"status": "success", "message": "Event processed", "dedup_key": key}, {}


def _handler_for(standin: PagerDutyStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            found = self.path == "/v2/enqueue"
            status, body, headers = standin.handle(raw) if found else (404, {}, {})
            send_json(self, status, body, headers)

        def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
            return

    return Handler
