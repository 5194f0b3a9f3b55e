"""Undo a multi-command action that failed part-way, so the host is not left half-changed.

``systemctl stop`` worked, ``systemctl disable`` was refused: the unit is started again
from the captured state (``systemd.revert``'s own steps, skipping what already holds).
A drop-in written before ``daemon-reload`` failed is removed again. Both the failure
and the rollback go into the result.
"""

from __future__ import annotations

from dataclasses import replace

from bot.domain.action_result import CommandRecord
from bot.domain.host_state import CapturedState
from bot.remediation import catalog
from bot.remediation.catalog import ActionSpec
from bot.remediation.polling import ActionRun
from bot.remediation.readings import read_unit


def revert_params(spec: ActionSpec, captured: CapturedState | None) -> dict[str, str] | None:
    """Parameters of the action that puts the unit back as it was captured."""
    if spec.kind == "slurm.drain":
        from bot.remediation.slurm import revert_params as slurm_revert

        return slurm_revert(captured)
    if not spec.revertable or captured is None or not captured.units:
        return None
    unit = captured.units[0]
    if spec.kind == "systemd.dropin":
        return {"unit": unit.name}
    file_state = "enabled" if unit.enabled else "masked" if unit.masked else "disabled"
    return {"unit": unit.name, "unit_file_state": file_state,
            "active_state": "active" if unit.running else "inactive"}


def revert_kind(spec: ActionSpec) -> str:
    if spec.kind == "slurm.drain":
        return "slurm.resume"
    return "systemd.dropin_revert" if spec.kind == "systemd.dropin" else "systemd.revert"


def needed(records: list[CommandRecord]) -> bool:
    """Something changed before the failure: a command ran and worked."""
    return any(r.ran and r.ok for r in records)


def roll_back(ctx: ActionRun, captured: CapturedState,
              records: list[CommandRecord]) -> list[CommandRecord]:
    """Run the revert's steps against the unit as it is now; [] when nothing to undo."""
    from bot.remediation.steps import run_steps

    params = revert_params(ctx.spec, captured)
    if params is None or not needed(records) or not captured.units:
        return []
    spec = catalog.get(revert_kind(ctx.spec))
    clean = spec.validate(params)
    now = read_unit(ctx.runner, ctx.target, captured.units[0].name, ctx.options.probe_timeout_s)
    undo_ctx = replace(ctx, spec=spec, params=clean)
    return run_steps(undo_ctx, spec.render(clean), replace(captured, units=(now,)), [])


def describe(records: list[CommandRecord]) -> str:
    """The commands the rollback ran (steps whose state already held are left out)."""
    parts = [f"`{r.command}` {'ok' if r.ok else f'failed (exit {r.exit_status})'}"
             for r in records if r.ran]
    return "; ".join(parts) or "nothing needed undoing"
