"""A reboot proven by the host: the kernel's boot id before, a new one after.

A reboot cannot be verified when it is sent (the SSH session may die with it). What
proves it is ``/proc/sys/kernel/random/boot_id``: a fresh random id every boot. The
flow's reboot step polls it on the scheduler's tick; the CLI waits for it here,
bounded, so a reboot from ``act`` says "back after N s" or "did not come back within N s"
rather than "failed" a second after the command went out.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.domain.action_result import ActionResult, Outcome
from bot.remediation.actions.registry import find
from bot.ssh.base import Command, SSHError, SSHRunner, SSHTarget

BOOT_ID_CMD = "cat /proc/sys/kernel/random/boot_id"
_BOOT_ID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_NOT_SENT = frozenset({Outcome.REFUSED, Outcome.DRY_RUN, Outcome.UNREACHABLE})


def read_boot_id(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> str | None:
    """The host's current boot id, or None when it does not answer (or answers oddly)."""
    try:
        probe = runner.run(target, Command("boot_id", BOOT_ID_CMD, timeout_s))
    except SSHError:
        return None
    text = probe.stdout.strip().lower()
    return text if probe.ok and _BOOT_ID.fullmatch(text) else None


def requested(result: ActionResult) -> bool:
    """The reboot command went out: it exited 0, or the host dropped the session on it."""
    action = find(result.kind)
    if action is None or not action.reboots or result.outcome in _NOT_SENT:
        return False
    sent = [c for c in result.commands if c.ran]
    return bool(sent) and all(c.exit_status in (0, None, 255) or c.timed_out for c in sent)


@dataclass(frozen=True)
class RebootWait:
    """What waiting for the host saw: the new boot id (None: not back) and how long."""

    boot_id: str | None
    waited_s: float


def wait_back(runner: SSHRunner, target: SSHTarget, before: str | None, *, wait_s: float,
              poll_s: float = 2.0, timeout_s: float = 10.0,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> RebootWait:
    """Poll the boot id until it differs from ``before`` or ``wait_s`` passes (a host
    that does not answer is simply not back yet)."""
    start = clock()
    while True:
        now_id = read_boot_id(runner, target, timeout_s)
        waited = clock() - start
        if now_id is not None and now_id != before:
            return RebootWait(now_id, waited)
        if waited >= wait_s:
            return RebootWait(None, waited)
        sleep(min(poll_s, max(wait_s - waited, 0.05)))
