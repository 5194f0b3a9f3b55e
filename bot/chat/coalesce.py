"""Coalesce edits of one message: at most one send per interval, the latest content wins.

A remediation can change a message many times a second (progress, step results);
Slack allows roughly one ``chat.update`` per second per message before answering 429.
Edits are queued per message; a single sender thread sends each message's newest
content once its interval has passed, so nothing is dropped except superseded edits.
An optional ``gate`` spaces sends across bot replicas too: ``budget_gate`` asks the
shared Slack budget (``storage.slack_budget``: per workspace and method tier, and per
message). A 429 raises ``RateLimited`` out of the send; that one message is requeued for
its ``Retry-After`` while the thread goes on serving every other message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from storage.slack_budget import SlackBudget

log = logging.getLogger(__name__)

Gate = Callable[[Any], float]  # ref → seconds to wait before sending (0: go)
OnLimited = Callable[[Any, float], None]  # ref, Retry-After seconds


class RateLimited(Exception):
    """Slack answered 429 for one send; ``retry_after_s`` is what it asked us to wait."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"rate limited for {retry_after_s:g} s")
        self.retry_after_s = retry_after_s


def raise_on_429(call: Callable[[], SlackResponse]) -> Callable[[], SlackResponse]:
    """Wrap a Web API call so a 429 raises ``RateLimited`` instead of being slept on."""

    def wrapped() -> SlackResponse:
        try:
            return call()
        except SlackApiError as exc:
            if getattr(exc.response, "status_code", 0) != 429:
                raise
            headers = getattr(exc.response, "headers", {}) or {}
            raw = headers.get("Retry-After", headers.get("retry-after", "1"))
            try:
                wait = float(raw[0] if isinstance(raw, list) else raw)
            except (TypeError, ValueError, IndexError):
                wait = 1.0
            raise RateLimited(max(wait, 0.0)) from None

    return wrapped


class UpdateCoalescer:
    def __init__(
        self,
        send: Callable[[Any, Any], None],
        interval_s: float = 2.0,
        gate: Gate | None = None,
        supersedes: Callable[[Any, Any], bool] | None = None,
        on_limited: OnLimited | None = None,
    ) -> None:
        self._send, self.interval_s, self._gate = send, interval_s, gate
        self._supersedes = supersedes  # (new, queued) → replace the queued one?
        self._on_limited = on_limited
        self._pending: dict[Hashable, Any] = {}
        self._due: dict[Hashable, float] = {}
        self._last: dict[Hashable, float] = {}
        self._busy: set[Hashable] = set()
        self._cv = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, ref: Hashable, payload: Any) -> None:
        """Queue ``payload`` as the newest content for ``ref`` (replacing a queued one)."""
        with self._cv:
            if self._closed:
                raise RuntimeError("update coalescer is closed")
            queued = self._pending.get(ref)
            if queued is None or self._supersedes is None or self._supersedes(payload, queued):
                self._pending[ref] = payload
            if ref not in self._due:
                last = self._last.get(ref)
                now = time.monotonic()
                self._due[ref] = now if last is None else max(now, last + self.interval_s)
            self._ensure_thread()
            self._cv.notify_all()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued edit is sent (intervals still honoured); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
        return True

    def close(self, timeout_s: float = 30.0) -> bool:
        flushed = self.flush(timeout_s)
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return flushed

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="chat-update", daemon=True)
            self._thread.start()

    def _next(self) -> tuple[Hashable, Any] | None:
        """Under the lock: wait for the earliest due message and take it."""
        while not self._closed:
            now = time.monotonic()
            ready = [(d, r) for r, d in self._due.items() if d <= now and r not in self._busy]
            if ready:
                _, ref = min(ready, key=lambda x: x[0])
                del self._due[ref]
                self._busy.add(ref)
                self._last[ref] = now
                return ref, self._pending.pop(ref)
            waits = [d - now for r, d in self._due.items() if r not in self._busy]
            self._cv.wait(min(waits) if waits else None)
        return None

    def _run(self) -> None:
        while True:
            with self._cv:
                item = self._next()
            if item is None:
                return
            ref, payload = item
            wait = self._gate(ref) if self._gate is not None else 0.0
            if wait > 0:
                self._requeue(ref, payload, wait)
            elif self._deliver(ref, payload):
                with self._cv:
                    self._busy.discard(ref)
                    self._forget_old()
                    self._cv.notify_all()

    def _deliver(self, ref: Hashable, payload: Any) -> bool:
        """Send once; False when the message was requeued after a 429."""
        try:
            self._send(ref, payload)
        except RateLimited as exc:  # this message waits; the others go on
            log.info("chat update for %s rate limited; retrying in %.1fs", ref,
                     exc.retry_after_s)
            if self._on_limited is not None:
                self._on_limited(ref, exc.retry_after_s)
            self._requeue(ref, payload, max(exc.retry_after_s, 0.001))
            return False
        except Exception as exc:  # the sender logs and audits; keep serving others
            log.warning("chat update for %s failed: %s", ref, exc)
        return True

    def _requeue(self, ref: Hashable, payload: Any, wait: float) -> None:
        """Another replica sent this message just now: try again when its gate opens."""
        with self._cv:
            self._pending.setdefault(ref, payload)  # a newer edit queued meanwhile wins
            self._due[ref] = time.monotonic() + wait
            self._busy.discard(ref)
            self._cv.notify_all()

    def _forget_old(self) -> None:
        if len(self._last) < 1024:
            return
        cutoff = time.monotonic() - self.interval_s
        for ref in [r for r, t in self._last.items() if t < cutoff and r not in self._due]:
            del self._last[ref]


def wait_turn(try_now: Callable[[], float], max_wait_s: float = 60.0) -> None:
    """Block this caller (only) until the budget grants a call; a post must not be lost."""
    deadline = time.monotonic() + max_wait_s
    while (wait := try_now()) > 0 and time.monotonic() < deadline:
        time.sleep(min(wait, max(0.0, deadline - time.monotonic())))


def budget_gate(budget: SlackBudget) -> Gate:
    """The shared Slack budget as a gate: the message's spacing and its tier's rate."""
    return lambda ref: budget.try_update(ref.channel, ref.ts)


def hold_on_limit(budget: SlackBudget) -> OnLimited:
    """After a 429, every replica leaves that message alone until Retry-After."""
    return lambda ref, seconds: budget.hold_message(ref.channel, ref.ts, seconds)
