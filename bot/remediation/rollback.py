"""Undo a multi-command action that failed part-way, so the host is not left half-changed.

``systemctl stop`` worked, ``systemctl disable`` was refused: the unit is started again
from the captured state (its revert action's own steps, skipping what already holds).
A drop-in written before ``daemon-reload`` failed is removed again. Both the failure
and the rollback go into the result.
"""

from __future__ import annotations

from dataclasses import replace

from bot.domain.action_result import CommandRecord
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action
from bot.remediation.actions.registry import get
from bot.remediation.polling import ActionRun
from bot.remediation.readings import read_unit
from bot.remediation.steps import run_steps


def revert_params(spec: Action, captured: CapturedState | None) -> dict[str, str] | None:
    """Parameters of the action that puts back what ``captured`` shows (``spec``'s own)."""
    return spec.revert_params(captured)


def revert_kind(spec: Action) -> str | None:
    """The kind that undoes ``spec`` (None: nothing does)."""
    return spec.revert_kind


def needed(records: list[CommandRecord]) -> bool:
    """Something changed before the failure: a command ran and worked."""
    return any(r.ran and r.ok for r in records)


def roll_back(ctx: ActionRun, captured: CapturedState,
              records: list[CommandRecord]) -> list[CommandRecord]:
    """Run the revert's steps against the unit as it is now; [] when nothing to undo."""
    params = ctx.spec.revert_params(captured)
    kind = ctx.spec.revert_kind
    if params is None or kind is None or not needed(records) or not captured.units:
        return []
    spec = get(kind)
    clean = spec.validate(params)
    now = read_unit(ctx.runner, ctx.target, captured.units[0].name, ctx.options.probe_timeout_s)
    undo_ctx = replace(ctx, spec=spec, params=clean)
    return run_steps(undo_ctx, spec.render(clean), replace(captured, units=(now,)), [])


def describe(records: list[CommandRecord]) -> str:
    """The commands the rollback ran (steps whose state already held are left out)."""
    parts = [f"`{r.command}` {'ok' if r.ok else f'failed (exit {r.exit_status})'}"
             for r in records if r.ran]
    return "; ".join(parts) or "nothing needed undoing"
