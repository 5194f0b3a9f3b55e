"""Is each background loop making progress? What ``/readyz`` reports besides PING (issue 39).

Redis can answer PING while the loops that do the bot's work cannot: a consumer whose
every read fails, an outbox whose every claim is refused (out of memory), a reconciler
whose sweeps fail, or a loop thread that hangs. Each loop says ``ok(name)`` after an
iteration that did its work and ``failed(name, reason)`` after one that could not;
``stuck()`` lists the loops failing, or silent, for longer than their grace, with the
last reason, and ``/readyz`` answers 503 with them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Loop:
    grace_s: float
    last_ok: float
    failing_since: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class Stuck:
    """One loop that has not made progress for ``for_s`` seconds, and why."""

    name: str
    for_s: float
    reason: str

    def line(self) -> str:
        why = self.reason or "no iteration finished"
        return f"{self.name}: no progress for {self.for_s:.0f}s ({why})"


class Heartbeats:
    """The loops of one process and their last progress; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._loops: dict[str, _Loop] = {}
        self._lock = threading.Lock()

    def watch(self, name: str, grace_s: float) -> None:
        """Start watching ``name``: it counts as fresh now, stuck after ``grace_s`` without
        an ``ok``."""
        with self._lock:
            self._loops[name] = _Loop(grace_s, self.clock())

    def ok(self, name: str) -> None:
        with self._lock:
            loop = self._loops.get(name)
            if loop is not None:
                loop.last_ok, loop.failing_since, loop.reason = self.clock(), None, ""

    def failed(self, name: str, reason: str) -> None:
        """An iteration of ``name`` could not do its work (kept until its next ``ok``)."""
        with self._lock:
            loop = self._loops.get(name)
            if loop is not None:
                if loop.failing_since is None:
                    loop.failing_since = self.clock()
                loop.reason = reason[:200]

    def stuck(self) -> list[Stuck]:
        """The loops failing for longer than their grace, or with no ``ok`` for as long."""
        now, out = self.clock(), []
        with self._lock:
            for name, loop in sorted(self._loops.items()):
                since = loop.failing_since if loop.failing_since is not None else loop.last_ok
                if now - since > loop.grace_s:
                    out.append(Stuck(name, now - loop.last_ok, loop.reason))
        return out

    def ages(self) -> dict[str, float]:
        """Seconds since each loop's last ``ok`` (the ``/metrics`` gauge)."""
        now = self.clock()
        with self._lock:
            return {name: now - loop.last_ok for name, loop in self._loops.items()}
