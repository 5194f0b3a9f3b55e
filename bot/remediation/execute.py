"""``execute``: one approved catalog action, run once, verified, and audited.

capture → (no-op if the effect already holds) → each command with its deadline →
re-probe what timed out or failed → verify the effect → one ``ActionResult``. The
audit log gets a "started" entry before anything runs (a crash mid-action still
leaves a trace) and the full result after.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.core import metrics, strings
from bot.remediation import catalog
from bot.remediation.capture import capture
from bot.remediation.catalog import ActionRefused, ActionSpec, Step
from bot.remediation.options import RemediationOptions
from bot.remediation.outcome import decide, summarize
from bot.remediation.probes import ProbeFailed
from bot.remediation.result import ActionResult, CommandRecord, Outcome, Verification
from bot.remediation.resume import preflight, resume_extraction
from bot.remediation.state import CapturedState
from bot.remediation.steps import all_skipped, hard_failure, precheck, run_steps
from bot.remediation.verify import Ctx, verify
from bot.ssh.base import SSHError, SSHRunner, SSHTarget


class AuditSink(Protocol):
    """``storage.audit.AuditLog`` has exactly this method."""

    def append(self, incident_id: str, actor: str, action: str, detail: dict[str, Any],
               evidence_hash: str | None = None) -> object: ...


def cli_incident_id(now: float | None = None) -> str:
    """The incident id for an action taken outside any incident (the CLI)."""
    return f"cli-{int(now if now is not None else time.time())}"


@dataclass
class _Run:
    """What every result of one call shares; ``finish`` makes the result."""

    spec: ActionSpec
    params: dict[str, str]
    target: SSHTarget
    approver: str
    evidence_hash: str | None
    incident_id: str
    planned: tuple[str, ...]
    started_at: float = field(default_factory=time.time)
    t0: float = field(default_factory=time.monotonic)

    def finish(self, outcome: Outcome, summary: str, *, records: list[CommandRecord] | None = None,
               captured: CapturedState | None = None,
               verification: Verification | None = None) -> ActionResult:
        return ActionResult(
            kind=self.spec.kind, params=self.params, host=self.target.name, outcome=outcome,
            summary=summary, approver=self.approver, evidence_hash=self.evidence_hash,
            planned=self.planned, commands=tuple(records or ()), captured=captured,
            verification=verification, started_at=self.started_at,
            duration_s=time.monotonic() - self.t0, incident_id=self.incident_id,
            revert_params=revert_params(self.spec, captured))


def revert_params(spec: ActionSpec, captured: CapturedState | None) -> dict[str, str] | None:
    """``systemd.revert`` parameters that put the unit back as it was captured."""
    if not spec.revertable or captured is None or not captured.units:
        return None
    unit = captured.units[0]
    file_state = "enabled" if unit.enabled else "masked" if unit.masked else "disabled"
    return {"unit": unit.name, "unit_file_state": file_state,
            "active_state": "active" if unit.running else "inactive"}


def audit_refusal(sink: AuditSink | None, incident_id: str, actor: str, kind: str,
                  params: dict[str, Any], target: SSHTarget, reason: str,
                  evidence_hash: str | None) -> None:
    """A refused kind or parameter is recorded too: someone tried to run it."""
    if sink is not None:
        sink.append(incident_id, actor, "action.refused",
                    {"kind": kind[:100], "params": _safe_params(params), "host": target.name,
                     "reason": reason}, evidence_hash)


def _audit(sink: AuditSink | None, run: _Run, action: str, detail: dict[str, Any]) -> None:
    if sink is not None:
        sink.append(run.incident_id, run.approver, action, detail, run.evidence_hash)


def _safe_params(params: dict[str, Any]) -> dict[str, str]:
    """Refused parameters are evidence: keep them, cut short, never run them."""
    return {str(k)[:64]: str(v)[:200] for k, v in params.items()}


def execute(runner: SSHRunner, target: SSHTarget, kind: str, params: dict[str, str], *,
            approver: str, evidence_hash: str | None, audit: AuditSink | None,
            dry_run: bool = False, options: RemediationOptions | None = None,
            incident_id: str | None = None) -> ActionResult:
    """Run one catalog action on ``target``; see the module docstring.

    Raises ``ActionRefused`` (exit status 2 in the CLI) for an unknown kind or a
    parameter outside the grammar; the refusal is audited first. Host trouble never
    raises: it is an outcome (``unreachable``, ``failed``, ``timed_out``...).
    """
    options = options or RemediationOptions()
    incident = incident_id or cli_incident_id()
    try:
        spec, clean, rendered = catalog.steps(kind, params)
    except ActionRefused as exc:
        audit_refusal(audit, incident, approver, kind, params, target, exc.message, evidence_hash)
        raise
    planned = tuple(catalog.plan(kind, clean, target))
    if not spec.remote and not dry_run:
        preflight(options)  # no Redis or no extraction package: refuse before "started"
    run = _Run(spec, clean, target, approver, evidence_hash, incident, planned)
    if dry_run:
        note = strings.REM_DRY_RUN.format(n=len(planned), host=target.name)
        result = run.finish(Outcome.DRY_RUN, note)
        _audit(audit, run, "action.dry_run", result.to_dict())
        return result
    _audit(audit, run, "action.started", {"kind": kind, "params": clean, "host": target.name,
                                          "address": target.address, "planned": list(planned)})
    if spec.remote:
        result = _remote(Ctx(runner, target, spec, clean, options), rendered, run)
    else:
        outcome, summary = resume_extraction(options, clean["job"])
        result = run.finish(outcome, summary)
    _audit(audit, run, f"action.{result.outcome.value}", result.to_dict())
    metrics.ACTIONS.labels(kind=kind, result=result.outcome.value).inc()
    return result


def _subject(ctx: Ctx) -> str:
    if "pid" in ctx.params:
        return f"PID {ctx.params['pid']}"
    return ctx.params.get("unit") or "the journal"


def _remote(ctx: Ctx, rendered: tuple[Step, ...], run: _Run) -> ActionResult:
    host = ctx.target.name
    try:
        captured = capture(ctx.runner, ctx.target, ctx.spec, ctx.params, ctx.options)
    except SSHError as exc:
        return run.finish(Outcome.UNREACHABLE, strings.REM_UNREACHABLE.format(host=host, why=exc))
    except ProbeFailed as exc:
        return run.finish(Outcome.FAILED, strings.REM_CAPTURE_FAILED.format(
            subject=_subject(ctx), host=host, why=exc))
    if captured.units and not captured.units[0].exists:
        return run.finish(Outcome.FAILED, strings.REM_UNIT_MISSING.format(
            unit=captured.units[0].name, host=host), captured=captured)
    noop = all_skipped(ctx, rendered, captured)
    records: list[CommandRecord] = []
    try:
        if noop:
            records = [CommandRecord(s.name, s.text(ctx.target.sudo),
                                     skipped=precheck(ctx, s, captured))
                       for s in rendered if s.name != "kill"]
        else:
            run_steps(ctx, rendered, captured, records)
        patient = not noop and not any(hard_failure(r) for r in records)
        verification = verify(ctx, captured, patient=patient)
    except SSHError as exc:
        return run.finish(Outcome.UNREACHABLE, strings.REM_UNREACHABLE.format(host=host, why=exc),
                          records=records, captured=captured)
    except ProbeFailed as exc:
        verification = Verification(False, f"could not verify: {exc}")
    outcome = decide(records, verification, noop=noop)
    summary = summarize(ctx.spec, _subject(ctx), host, outcome, records, verification)
    return run.finish(outcome, summary, records=records, captured=captured,
                      verification=verification)
