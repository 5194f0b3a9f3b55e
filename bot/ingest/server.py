"""uvicorn, configured so that slow or greedy clients cannot hold the service.

uvicorn's h11 protocol closes an idle keep-alive connection (``timeout_keep_alive``) and
answers 503 past ``limit_concurrency``, but it never times out a request whose headers
are still arriving: four clients that trickle one header byte a second hold four
connections for ever. ``HeaderDeadline`` adds that deadline; the body's own deadline is
enforced where the app reads it (``bot.core.bodies.read_capped``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from bot.config.settings import HttpSettings


class HeaderDeadline(H11Protocol):
    """h11 with a deadline for each request's headers (the first and every keep-alive one)."""

    header_timeout_s = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the headers are in: the body has its own
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection gets the same deadline

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def protocol_with(header_timeout_s: float) -> type[H11Protocol]:
    """A ``HeaderDeadline`` class for one server (uvicorn instantiates it per connection)."""
    return type("HeaderDeadlineProtocol", (HeaderDeadline,), {"header_timeout_s": header_timeout_s})


def server_config(app: Any, http: HttpSettings, host: str | None = None,
                  port: int | None = None, **extra: Any) -> uvicorn.Config:
    """The one uvicorn configuration ``serve``, the demo and the tests run with."""
    return uvicorn.Config(
        app, host=host or http.host, port=http.port if port is None else port,
        http=protocol_with(http.header_timeout_s), timeout_keep_alive=http.keep_alive_s,
        limit_concurrency=http.max_connections,
        h11_max_incomplete_event_size=http.max_header_bytes,
        log_level="warning", access_log=False, lifespan="on", **extra)
