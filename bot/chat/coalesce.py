"""Coalesce edits of one message: at most one send per interval, the latest content wins.

A remediation can change a message many times a second (progress, step results);
Slack allows roughly one ``chat.update`` per second per message before answering 429.
Edits are queued per message; a single sender thread sends each message's newest
content once its interval has passed, so nothing is dropped except superseded edits.
An optional ``gate`` (a Redis ``SET NX PX``) spaces sends across bot replicas too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from storage import keys

log = logging.getLogger(__name__)

Gate = Callable[[Any], float]  # ref → seconds to wait before sending (0: go)


class UpdateCoalescer:
    def __init__(
        self,
        send: Callable[[Any, Any], None],
        interval_s: float = 2.0,
        gate: Gate | None = None,
        supersedes: Callable[[Any, Any], bool] | None = None,
    ) -> None:
        self._send, self.interval_s, self._gate = send, interval_s, gate
        self._supersedes = supersedes  # (new, queued) → replace the queued one?
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
                continue
            try:
                self._send(ref, payload)
            except Exception as exc:  # the sender logs and audits; keep serving others
                log.warning("chat update for %s failed: %s", ref, exc)
            with self._cv:
                self._busy.discard(ref)
                self._forget_old()
                self._cv.notify_all()

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


def redis_gate(redis: Redis, interval_s: float) -> Gate:
    """A cross-replica gate: ``SET NX PX`` per message; a Redis outage never blocks chat."""
    ms = max(1, int(interval_s * 1000))

    def gate(ref: Any) -> float:
        key = keys.chat_update_gate(ref.channel, ref.ts)
        try:
            if redis.set(key, "1", nx=True, px=ms):
                return 0.0
            left = redis.pttl(key)
        except RedisError as exc:
            log.warning("chat update gate unavailable: %s", exc)
            return 0.0
        return max(int(left), 1) / 1000 if isinstance(left, int) and left > 0 else 0.001

    return gate
