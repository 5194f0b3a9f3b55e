"""Preflight: before anything changes, can this action succeed, and should it run at all?

Checked on the captured state plus a few read-only probes, each action for itself
(``Action.preflight``: the unit exists; a mask can succeed; a terminate does not fight
systemd; a GPU reset has no process on that GPU; a cleanup's files are ours to delete; a
drain does not overwrite a person's reason), then for every action that ``sudo -n -l``
allows each command as written. A refusal says why and what to do instead; nothing ran.
"""

from __future__ import annotations

from typing import Any

from bot.core import strings
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Refusal
from bot.remediation.actions.registry import get
from bot.remediation.polling import ActionRun
from bot.remediation.probe_runner import run_probes, tool_words
from bot.remediation.spec import RemoteStep
from playbooks import probes

__all__ = ["Refusal", "check", "proposal", "sudo_check"]


def proposal(kind: str, params: dict[str, str], reason: str) -> dict[str, Any] | None:
    """An alternative as plain data (the flow turns it into a button); None when its
    parameters fail its grammar (a hostile unit name is never proposed)."""
    return get(kind).proposal(params, reason)


def sudo_check(ctx: ActionRun, steps: tuple[RemoteStep, ...]) -> Refusal | None:
    """``sudo -n -l CMD...`` for every command: exit 0 means the rules allow it as written."""
    if not ctx.target.sudo or not steps:
        return None
    asks = [probes.sudo_allows(s.name, s.argv) for s in steps]
    answers = run_probes(ctx.runner, ctx.target, asks, ctx.options.probe_timeout_s)
    for step, (probe, _) in zip(steps, answers, strict=True):
        if not probe.ok:
            return Refusal(strings.REM_SUDO_DENIED.format(
                host=ctx.target.name, command=step.text(True), why=tool_words(probe)
                or "not allowed"))
    return None


def check(ctx: ActionRun, captured: CapturedState, steps: tuple[RemoteStep, ...]) -> Refusal | None:
    """The first reason not to run, or None: then every step may be sent."""
    return ctx.spec.preflight(ctx, captured) or sudo_check(ctx, steps)
