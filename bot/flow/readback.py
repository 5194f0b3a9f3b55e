"""Read back whether an interrupted action took effect, without running it again (issue 24).

When the replica running an action dies (or Redis drops out under it), nobody knows how
far its commands got on the host. Running the action again is never the answer (a second
reboot, a SIGKILL to a PID that was reused), so the host is asked instead, with the
action's own checks and nothing new: ``capture`` the subject as it is now, ``all_skipped``
(every step's effect already holds: the precheck that makes a repeated action a no-op)
and ``verify`` (the same patient look a normal run ends with, twice ``settle_s`` apart).

A GPU-freeing action also needs every GPU it can see free: without the before-state the
read-back cannot tell which GPUs the action was meant to free, and an unsure read-back
must not say "verified" (it fails with Retry, which is always safe). Only read probes run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome, Seen, Verification
from bot.domain.host_state import CapturedState
from bot.remediation import catalog
from bot.remediation.capture import capture
from bot.remediation.catalog import ActionRefused
from bot.remediation.options import RemediationOptions
from bot.remediation.polling import ActionRun
from bot.remediation.probe_runner import ProbeFailed
from bot.remediation.steps import all_skipped
from bot.remediation.verify import gpu_range, verify
from bot.ssh.base import SSHError, SSHRunner, SSHTarget

READ_BACK_ACTOR = "reconciler"  # who the audit says settled an interrupted action


@dataclass(frozen=True)
class ReadBack:
    """What the host shows for one interrupted action."""

    holds: bool  # the action's effect is there: settle as verified
    seen: str  # what the host shows, or why it could not be read
    reachable: bool = True
    result: ActionResult | None = None  # the verified outcome, when ``holds``
    evidence: dict[str, Any] | None = None

    def audit_detail(self) -> dict[str, Any]:
        return {"holds": self.holds, "reachable": self.reachable, "seen": self.seen[:500],
                "evidence": self.evidence or {}}


@dataclass(frozen=True)
class Asked:
    """Who approved the action and what it was: the read-back's result names them."""

    kind: str
    params: dict[str, str]
    approver: str
    evidence_hash: str | None
    incident_id: str


@dataclass(frozen=True)
class Interrupted:
    """How one interrupted action settles: verified from the read-back, or failed (its
    line and the move are ``bot.domain.flow``'s ``ActionReadBack``)."""

    kind: str
    text: str  # the result line
    seen: ReadBack | None = None  # None: nothing to read back (it never started)

    @property
    def result(self) -> ActionResult | None:
        return self.seen.result if self.seen is not None else None


def read_back(runner: SSHRunner, target: SSHTarget, asked: Asked,
              options: RemediationOptions) -> ReadBack:
    """Probe ``target`` for ``asked``'s effect; never raises for host trouble."""
    try:
        spec, clean, rendered = catalog.steps(asked.kind, asked.params)
    except ActionRefused as exc:
        return ReadBack(False, exc.message)
    if not spec.remote or spec.reboots:
        return ReadBack(False, strings.FLOW_READ_BACK_NONE.format(kind=spec.kind))
    started, t0 = time.time(), time.monotonic()
    ctx = ActionRun(runner, target, spec, clean, options)
    try:
        captured = capture(runner, target, spec, clean, options)
        effect = all_skipped(ctx, rendered, captured)
        seen = verify(ctx, captured, patient=effect)
    except SSHError as exc:
        return ReadBack(False, strings.FLOW_READ_BACK_UNREACHABLE.format(host=target.name,
                                                                           why=exc), False)
    except ProbeFailed as exc:
        if exc.silent:  # no answer at all: the host is not there to be read
            return ReadBack(False, strings.FLOW_READ_BACK_UNREACHABLE.format(
                host=target.name, why=exc), False)
        return ReadBack(False, strings.FLOW_READ_BACK_UNREADABLE.format(why=exc))
    held = _held_gpus(captured, options) if spec.read_back_gpus() else []
    evidence = {**seen.evidence, "effect_holds": effect, "gpus_held": held}
    if not (effect and seen.ok and not held):
        return ReadBack(False, _not_there(seen, held), evidence=evidence)
    summary = strings.FLOW_READ_BACK_DONE.format(subject=_subject(spec.kind, clean),
                                                 title=spec.title, host=target.name,
                                                 seen=seen.detail)
    result = ActionResult(
        kind=spec.kind, params=clean, host=target.name, outcome=Outcome.SUCCEEDED,
        summary=summary, approver=asked.approver, evidence_hash=asked.evidence_hash,
        planned=tuple(catalog.plan(spec.kind, clean, target)),  # no before-state: no Revert
        verification=Verification(Seen.FIXED, seen.detail, seen.elapsed_s, evidence=evidence),
        started_at=started, duration_s=time.monotonic() - t0, incident_id=asked.incident_id)
    return ReadBack(True, seen.detail, result=result, evidence=evidence)


def _held_gpus(captured: CapturedState, options: RemediationOptions) -> list[int]:
    """Every GPU still holding memory; all of them when the GPUs could not be read."""
    if captured.errors and not captured.gpus:
        return [-1]
    return [g.index for g in captured.gpus if g.memory_used_mib >= options.gpu_free_mib]


def _not_there(seen: Verification, held: list[int]) -> str:
    """What the host shows instead: verify's own words, plus the GPUs still in use when
    verify itself was satisfied (its words then say nothing of them)."""
    parts = [seen.detail] if seen.detail else []
    if held == [-1]:
        parts.append(strings.FLOW_READ_BACK_NO_GPUS)
    elif held and seen.ok:
        parts.append(strings.FLOW_READ_BACK_HELD.format(gpus=gpu_range(held)))
    return "; ".join(parts) or strings.FLOW_READ_BACK_NOT_DONE


def _subject(kind: str, params: dict[str, str]) -> str:
    """What the action acted on, as the result line names it."""
    if "unit" in params:
        return params["unit"]
    if "pid" in params:
        return f"PID {params['pid']}"
    if "gpu" in params:
        return f"GPU {params['gpu']}"
    return params.get("node") or kind
