"""One Events API v2 call: the item in, what to do with it out (sent, retry, rejected).

The client never sleeps: a 429's ``Retry-After`` and a 5xx or timeout come back as
``RETRY`` and the outbox keeps the item at the head with its next time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import httpx

from bot.domain.paging import PageItem, events_v2_body


class SendOutcome(StrEnum):
    SENT = "sent"
    RETRY = "retry"  # 429, 5xx, timeout, connection refused: the same item later
    REJECTED = "rejected"  # 4xx other than 429: resending will not help


@dataclass(frozen=True)
class SendResult:
    outcome: SendOutcome
    status: int | None = None
    retry_after: str | None = None  # a 429's header, as sent
    error: str = ""


class EventSender(Protocol):
    def send(self, item: PageItem) -> SendResult: ...


class EventsV2Client:
    """``POST`` to the Events v2 enqueue URL with the routing key from the environment."""

    def __init__(self, url: str, routing_key: str, timeout_s: float = 10.0) -> None:
        self.url, self.routing_key = url, routing_key
        self.http = httpx.Client(timeout=timeout_s)

    def send(self, item: PageItem) -> SendResult:
        try:
            reply = self.http.post(self.url, json=events_v2_body(item, self.routing_key))
        except httpx.HTTPError as exc:
            return SendResult(SendOutcome.RETRY, error=f"{type(exc).__name__}: {exc}"[:300])
        return classify(reply.status_code, reply.headers.get("Retry-After"), reply.text)

    def close(self) -> None:
        self.http.close()


def classify(status: int, retry_after: str | None, text: str) -> SendResult:
    if 200 <= status < 300:
        return SendResult(SendOutcome.SENT, status)
    if status == 429 or status >= 500 or status == 408:
        return SendResult(SendOutcome.RETRY, status, retry_after if status == 429 else None,
                          f"HTTP {status}")
    return SendResult(SendOutcome.REJECTED, status, None, f"HTTP {status}: {text[:300]}")
