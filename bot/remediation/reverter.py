"""Revert: put a unit back as it was captured before the action (file and active state).

The captured state travels inside the stored ``ActionResult``, so the Revert button
works after the bot restarts. Reverting is itself an action (the one the action names as
its ``revert_kind``): validated, planned, verified and audited like any other.
"""

from __future__ import annotations

from bot.core.errors import UserError
from bot.domain.action_result import ActionResult
from bot.domain.host_state import CapturedState
from bot.remediation.actions.registry import get
from bot.remediation.executor import AuditSink, execute
from bot.remediation.options import RemediationOptions
from bot.ssh.base import SSHRunner, SSHTarget


def params_for(captured: CapturedState) -> dict[str, str]:
    """The revert's params from a capture; ``UserError`` if that kind cannot be undone."""
    action = get(captured.kind)
    params = action.revert_params(captured)
    if params is None or action.revert_kind is None:
        raise UserError(f"{captured.kind} cannot be reverted (nothing captured to restore)", 2)
    return params


def revert(runner: SSHRunner, target: SSHTarget, captured: CapturedState, *, approver: str,
           evidence_hash: str | None, audit: AuditSink | None, dry_run: bool = False,
           options: RemediationOptions | None = None,
           incident_id: str | None = None) -> ActionResult:
    """Restore the captured unit-file and active state of the unit ``captured`` names."""
    if captured.host != target.name:
        raise UserError(f"this capture is from {captured.host}, not {target.name}", 2)
    params = params_for(captured)
    kind = str(get(captured.kind).revert_kind)
    return execute(runner, target, kind, params, approver=approver,
                   evidence_hash=evidence_hash, audit=audit, dry_run=dry_run, options=options,
                   incident_id=incident_id)


def revert_result(runner: SSHRunner, target: SSHTarget, result: ActionResult | dict[str, object],
                  **kwargs: object) -> ActionResult:
    """Revert from a stored result (``ActionResult.to_dict()`` from incident meta)."""
    stored = result if isinstance(result, ActionResult) else ActionResult.from_dict(dict(result))
    if stored.captured is None or not stored.revertable:
        raise UserError(f"{stored.kind} on {stored.host} ({stored.outcome.value}) "
                        "has nothing to revert", 2)
    kwargs.setdefault("incident_id", stored.incident_id)
    return revert(runner, target, stored.captured, **kwargs)  # type: ignore[arg-type]
