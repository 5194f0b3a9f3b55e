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
from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Verification
from bot.domain.host_state import CapturedState
from bot.remediation import catalog
from bot.remediation.actions.base import Action
from bot.remediation.capture import capture
from bot.remediation.catalog import ActionRefused, RemoteStep
from bot.remediation.options import RemediationOptions
from bot.remediation.outcome import decide, summarize
from bot.remediation.polling import ActionRun
from bot.remediation.preflight import Refusal, check
from bot.remediation.probe_runner import ProbeFailed
from bot.remediation.resume import preflight, resume_extraction
from bot.remediation.rollback import describe, roll_back
from bot.remediation.steps import all_skipped, hard_failure, precheck, run_steps
from bot.remediation.verify import verify
from bot.ssh.base import NOT_SENT_ERRORS, SSHError, SSHRunner, SSHTarget


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

    spec: Action
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
               verification: Verification | None = None, proposals: tuple[dict[str, Any], ...] = (),
               rollback: list[CommandRecord] | None = None) -> ActionResult:
        return ActionResult(
            kind=self.spec.kind, params=self.params, host=self.target.name, outcome=outcome,
            summary=summary, approver=self.approver, evidence_hash=self.evidence_hash,
            planned=self.planned, commands=tuple(records or ()), captured=captured,
            verification=verification, started_at=self.started_at,
            duration_s=time.monotonic() - self.t0, incident_id=self.incident_id,
            revert_params=self.spec.revert_params(captured), proposals=proposals,
            rollback=tuple(rollback or ()))


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
        result = _remote(ActionRun(runner, target, spec, clean, options), rendered, run, audit)
    else:
        outcome, summary = resume_extraction(options, clean["job"])
        result = run.finish(outcome, summary)
    _audit(audit, run, f"action.{result.outcome.value}", result.to_dict())
    metrics.ACTIONS.labels(kind=kind, result=result.outcome.value).inc()
    return result


def _subject(ctx: ActionRun) -> str:
    return ctx.spec.subject(ctx.params, ctx.target.name)


def _remote(ctx: ActionRun, rendered: tuple[RemoteStep, ...], run: _Run,
            audit: AuditSink | None = None) -> ActionResult:
    host = ctx.target.name
    try:
        captured = capture(ctx.runner, ctx.target, ctx.spec, ctx.params, ctx.options)
        refusal = check(ctx, captured, rendered)
    except SSHError as exc:
        return run.finish(Outcome.UNREACHABLE, strings.REM_UNREACHABLE.format(host=host, why=exc))
    except ProbeFailed as exc:
        return run.finish(Outcome.FAILED, strings.REM_CAPTURE_FAILED.format(
            subject=_subject(ctx), host=host, why=exc))
    if refusal is not None:
        return _refused(ctx, run, captured, refusal)
    _audit_override(ctx, run, captured, audit)
    records: list[CommandRecord] = []
    try:
        return _act(ctx, rendered, run, captured, records)
    except (SSHError, ProbeFailed) as exc:  # the host stopped answering part-way (issue 39)
        return run.finish(Outcome.UNREACHABLE, midway_summary(host, exc, records),
                          records=records, captured=captured)


def stopped_midway(result: ActionResult) -> bool:
    """The host stopped answering after some of the action had been sent to it."""
    return result.outcome is Outcome.UNREACHABLE and bool(sent_commands(result.commands))


def midway_summary(host: str, why: object, records: list[CommandRecord]) -> str:
    """The host stopped answering during the action: what was sent before it did (its
    effect unknown), or that nothing was."""
    sent = sent_commands(records)
    if not sent:
        return strings.REM_UNREACHABLE.format(host=host, why=why)
    return strings.REM_LOST_MIDWAY.format(host=host, why=why,
                                          sent="; ".join(f"`{c}`" for c in sent))


def sent_commands(records: list[CommandRecord] | tuple[CommandRecord, ...]) -> list[str]:
    """The commands that went to the host: not skipped, and not refused a channel."""
    return [r.command for r in records
            if r.command and not r.skipped and r.error not in NOT_SENT_ERRORS]


def _refused(ctx: ActionRun, run: _Run, captured: CapturedState, refusal: Refusal) -> ActionResult:
    summary = strings.REM_REFUSED.format(kind=ctx.spec.phrase(ctx.params) or ctx.spec.kind,
                                         host=ctx.target.name, why=refusal.reason)
    return run.finish(Outcome.REFUSED, summary, captured=captured, proposals=refusal.proposals)


def _audit_override(ctx: ActionRun, run: _Run, captured: CapturedState,
                    audit: AuditSink | None) -> None:
    """Acting against a restart policy on purpose is its own audit entry."""
    owner = ctx.spec.restarting_owner(ctx, captured)
    if owner is not None and ctx.params.get("override") == "yes":
        note = strings.REM_OVERRIDE.format(pid=captured.processes[0].pid, unit=owner.name,
                                           restart=owner.restart)
        _audit(audit, run, "action.override", {"kind": ctx.spec.kind, "params": ctx.params,
                                               "unit": owner.name, "note": note})


def _act(ctx: ActionRun, rendered: tuple[RemoteStep, ...], run: _Run, captured: CapturedState,
         records: list[CommandRecord]) -> ActionResult:
    noop = all_skipped(ctx, rendered, captured)
    if noop:
        records += [CommandRecord(s.name, s.text(ctx.target.sudo),
                                  skipped=precheck(ctx, s, captured))
                    for s in rendered if ctx.spec.counts_for_noop(s)]
    else:
        run_steps(ctx, rendered, captured, records)
    failed = any(hard_failure(r) for r in records)
    undo = roll_back(ctx, captured, records) if failed else []
    verification = verify(ctx, captured, patient=not noop and not failed)
    outcome = decide(records, verification, noop=noop)
    summary = summarize(ctx.spec, _subject(ctx), ctx.target.name, outcome, records, verification,
                        grace_s=ctx.options.term_grace_s)
    if undo:
        said = (strings.REM_ROLLED_BACK if all(r.ok for r in undo)
                else strings.REM_ROLLBACK_FAILED)
        summary = said.format(failed=summary, undo=describe(undo))
    return run.finish(outcome, summary, records=records, captured=captured,
                      verification=verification, rollback=undo)
