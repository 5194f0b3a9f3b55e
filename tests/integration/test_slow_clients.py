"""Slow and greedy clients cannot hold the service: header and body deadlines, idle
keep-alive connections closed, a cap on connections (``bot.ingest.server``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from starlette.applications import Starlette

from bot.config.settings import HttpSettings
from bot.rig.serving import ServedApp
from tests.fixtures.alerts import AUTH
from tests.helpers.hostile import connect, read_answer, trickle_headers

LIMITS = HttpSettings(header_timeout_s=0.8, body_timeout_s=0.8, keep_alive_s=1, max_connections=4)


@pytest.fixture
def served(make_alert_app: Callable[..., Starlette]) -> Iterator[ServedApp]:
    server = ServedApp(make_alert_app(http=LIMITS.model_dump()), http=LIMITS).start()
    yield server
    server.stop()


def test_trickled_headers_are_closed_at_the_deadline(served: ServedApp) -> None:
    elapsed = trickle_headers(served.url, limit_s=10)
    assert LIMITS.header_timeout_s * 0.9 <= elapsed <= LIMITS.header_timeout_s + 1.5, elapsed


def test_second_request_on_a_kept_alive_connection_has_the_same_deadline(
        served: ServedApp) -> None:
    with connect(served.url, timeout_s=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock)[0] == 200
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never finished
        sock.settimeout(0.2)
        while time.monotonic() - started < 10:
            try:
                if sock.recv(1024) == b"":
                    break
            except TimeoutError:
                sock.sendall(b"X-A: b\r\n")  # keep trickling so keep-alive's timer never fires
    assert time.monotonic() - started <= LIMITS.header_timeout_s + 1.5


def test_trickled_body_gets_408(served: ServedApp) -> None:
    with connect(served.url, timeout_s=10) as sock:
        sock.sendall(b"POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: " + AUTH[
            "Authorization"].encode() + b"\r\nContent-Length: 100\r\n\r\n{")
        started = time.monotonic()
        status, body = read_answer(sock)
    assert status == 408 and b"not received within" in body
    assert time.monotonic() - started <= LIMITS.body_timeout_s + 1.5


def test_connections_past_the_cap_get_503_then_recover(served: ServedApp) -> None:
    idle = [connect(served.url) for _ in range(LIMITS.max_connections)]
    try:
        assert httpx.get(f"{served.url}/healthz", timeout=5).status_code == 503
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + 10
    while httpx.get(f"{served.url}/healthz", timeout=5).status_code != 200:
        assert time.monotonic() < deadline, "the cap did not free up"
