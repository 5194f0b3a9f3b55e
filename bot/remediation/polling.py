"""One action run and the patient look that every verification repeats.

``poll`` keeps looking until the goal holds twice ``settle_s`` apart and past the
restart window, the subject comes back (a respawn), or the deadline passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.remediation.options import RemediationOptions
from bot.ssh.base import SSHRunner, SSHTarget

if TYPE_CHECKING:
    from bot.remediation.actions.base import Action


@dataclass(frozen=True)
class ActionRun:
    """One action run: where, what, and how patient to be."""

    runner: SSHRunner
    target: SSHTarget
    spec: Action  # the action's class instance: its hooks decide per kind
    params: dict[str, str]
    options: RemediationOptions


@dataclass(frozen=True)
class Look:
    """One observation: is the goal met, did the subject come back, the evidence."""

    done: bool
    respawn: str | None
    evidence: dict[str, Any]


def poll(ctx: ActionRun, look: Callable[[], Look], patient: bool, window_s: float = 0.0,
          wait_s: float | None = None) -> tuple[Look, float]:
    """Look until done twice ``settle_s`` apart and past ``window_s``, a respawn, or the
    deadline (``wait_s``, default ``verify_timeout_s``, counted after the window)."""
    o = ctx.options
    start = time.monotonic()
    patience = o.verify_timeout_s if wait_s is None else max(wait_s, o.verify_timeout_s)
    deadline = start + (window_s + patience if patient else 0.0)
    first_done: float | None = None
    while True:
        seen = look()
        now = time.monotonic()
        if seen.respawn:
            return seen, now - start
        if seen.done:
            first_done = first_done if first_done is not None else now
            if not patient:
                return seen, first_done - start
            if now - first_done >= o.settle_s and now - start >= window_s:
                return seen, (now - start) if window_s else (first_done - start)
            time.sleep(min(o.settle_s, o.poll_interval_s if window_s else o.settle_s) + 0.01)
            continue
        first_done = None
        if now >= deadline:
            return seen, now - start
        time.sleep(o.poll_interval_s)
