"""How Slack Web API calls are retried: by ``slack_sdk``'s own retry handlers, never by a
loop of ours, and only where the caller may wait.

Three kinds of call, three clients over one token (``clients``):

- ``waiting``: a call whose caller can wait (an ephemeral reply, a modal, a file upload,
  reading a message, the App Home). slack_sdk's handlers retry it: a 429 after Slack's
  ``Retry-After``, 500/503 and 502/504 and Slack's own transient error codes with
  exponential backoff and jitter, a reset connection. Each retry is counted in
  ``/metrics`` (``incident_bot_slack_api_retries_total``).
- ``editing``: the coalesced ``chat.update`` of one message. The same, except a 429: it
  surfaces at once, so the coalescer re-queues the edit and holds the message for every
  replica (``bot/chat/coalesce.py``) instead of sleeping on a thread that serves others.
- ``once``: the durable outbox's sends (``post_once``/``update_once``/``find_posted``).
  No handler at all: one attempt, classified; on a 429 the outbox sets the item's due
  time to Slack's ``Retry-After`` and its loop moves on to other incidents. It must never
  sleep in the caller: one rate-limited channel would stall every incident behind it, and
  a retried post whose answer was lost would post twice (the outbox looks first).
"""

from __future__ import annotations

import threading
from typing import Any

from slack_sdk import WebClient
from slack_sdk.http_retry import (
    BackoffRetryIntervalCalculator,
    ConnectionErrorRetryHandler,
    HttpRequest,
    HttpResponse,
    RateLimitErrorRetryHandler,
    RetryHandler,
    RetryState,
)
from slack_sdk.http_retry.builtin_handlers import ServerErrorRetryHandler

from bot.core import metrics

RETRYABLE_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
BACKOFF = BackoffRetryIntervalCalculator(backoff_factor=0.5)  # 0.5, 1, 2 s …, with jitter
RATE_LIMITED_RETRIES = 8
_seen = threading.local()  # retries of the call in progress on this thread


def retries_so_far() -> int:
    return int(getattr(_seen, "retries", 0))


def start_counting() -> None:
    _seen.retries = 0


class _Counted(RetryHandler):
    """Count each retry (per method in /metrics, per call for the audit) before the SDK's
    handler waits and tries again."""

    def prepare_for_next_attempt(self, *, state: RetryState, request: HttpRequest,
                                 response: HttpResponse | None = None,
                                 error: Exception | None = None) -> None:
        method = request.url.rstrip("/").rsplit("/", 1)[-1]
        metrics.SLACK_API_RETRIES.labels(method=method).inc()
        _seen.retries = retries_so_far() + 1
        super().prepare_for_next_attempt(state=state, request=request, response=response,
                                         error=error)


class RateLimitedRetries(_Counted, RateLimitErrorRetryHandler):
    """slack_sdk's: waits the ``Retry-After`` Slack sent (plus up to a second of jitter)."""


class ServerErrorRetries(_Counted, ServerErrorRetryHandler):
    """slack_sdk's: HTTP 500 and 503, with backoff."""


class ConnectionRetries(_Counted, ConnectionErrorRetryHandler):
    """slack_sdk's: a reset or refused connection."""


class SlackErrorRetries(_Counted, RetryHandler):
    """What slack_sdk's built-ins leave out: 502/504 from a proxy in front of Slack, and
    Slack's own transient codes (``internal_error``, ``fatal_error`` …) on any status."""

    def _can_retry(self, *, state: RetryState, request: HttpRequest,
                   response: HttpResponse | None = None,
                   error: Exception | None = None) -> bool:
        if response is None:
            return False
        body: dict[str, Any] = response.body or {}
        return response.status_code in (502, 504) or body.get("error") in RETRYABLE_ERRORS


def waiting_handlers(attempts: int = 4) -> list[RetryHandler]:
    """For a caller that may wait: ``attempts`` tries in all on errors, more on 429s."""
    return [RateLimitedRetries(max_retry_count=RATE_LIMITED_RETRIES), *_error_handlers(attempts)]


def editing_handlers(attempts: int = 4) -> list[RetryHandler]:
    """For the coalesced edits: the same, but a 429 is the coalescer's to handle."""
    return _error_handlers(attempts)


def _error_handlers(attempts: int) -> list[RetryHandler]:
    n = max(0, attempts - 1)
    return [ServerErrorRetries(max_retry_count=n, interval_calculator=BACKOFF),
            SlackErrorRetries(max_retry_count=n, interval_calculator=BACKOFF),
            ConnectionRetries(max_retry_count=n, interval_calculator=BACKOFF)]


def with_handlers(client: WebClient, handlers: list[RetryHandler]) -> WebClient:
    """The same token, API URL and timeout, with these retry handlers."""
    return WebClient(token=client.token, base_url=client.base_url, timeout=client.timeout,
                     ssl=client.ssl, proxy=client.proxy, headers=dict(client.headers),
                     retry_handlers=handlers)
