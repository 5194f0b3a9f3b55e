"""What to offer after an action: Revert, resuming an interrupted extraction, what a
refusal proposed instead, the ladder's next rung, and the lasting fix (the drop-in).

The chat message shows these as buttons; the CLI prints them as commands. With
``chain_resume`` set, a GPU-freeing success resumes the host's interrupted jobs at
once under the same approval (the approver already saw the job in the findings).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome
from bot.domain.findings import ProposedAction
from bot.remediation.actions.base import Action, as_proposed
from bot.remediation.actions.extraction import ResumeExtraction
from bot.remediation.actions.registry import find, get
from bot.remediation.actions.slurm import SlurmResume
from bot.remediation.executor import AuditSink, execute
from bot.remediation.ladder import next_step
from bot.remediation.options import RemediationOptions
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.health_gate import GateResult

_DRAINED = (Outcome.SUCCEEDED, Outcome.TIMED_OUT_BUT_DONE, Outcome.NOOP)


def frees_gpus(kind: str) -> bool:
    """A verified action of ``kind`` leaves GPUs free (then: resume what they held)."""
    action = find(kind)
    return action is not None and action.frees_gpus


def _of(result: ActionResult) -> Action | None:
    return find(result.kind)


def revert_action(result: ActionResult) -> ProposedAction | None:
    action = _of(result)
    kind = action.revert_kind if action is not None else None
    if not result.revertable or result.revert_params is None or kind is None:
        return None
    params = dict(result.revert_params)
    return get(kind).propose(result.host, params,
                             strings.ACT_UNDO_REASON.format(kind=result.kind))


def alternatives(result: ActionResult) -> list[ProposedAction]:
    """What a refused action proposed instead, and the ladder's next step after a failure."""
    wanted = list(result.proposals)
    step = next_step(result)
    if step is not None:
        wanted.append(step)
    return [as_proposed(result.host, p) for p in wanted]


def lasting_fixes(result: ActionResult) -> list[ProposedAction]:
    """The lasting fix the verified action offers (``Action.lasting``: after a stop of a
    unit systemd restarts by itself, the drop-in), each its own approval."""
    action = _of(result)
    return action.lasting(result) if action is not None else []


def resume_actions(result: ActionResult, interrupted_jobs: Sequence[str]) -> list[ProposedAction]:
    """After GPUs were freed on a host with interrupted extractions: resume each."""
    if not frees_gpus(result.kind) or not result.ok or result.outcome is Outcome.DRY_RUN:
        return []
    return [ResumeExtraction.propose(result.host, {"job": job}, strings.ACT_RESUME_FREED_REASON
                                     .format(host=result.host, job=job))
            for job in interrupted_jobs]


def offers(result: ActionResult, interrupted_jobs: Sequence[str] = ()) -> list[ProposedAction]:
    """Everything the result message should offer, Revert first. A drained Slurm node is
    not offered back here: it returns only through the health gate (``return_to_slurm``)."""
    revert = revert_action(result)
    action = _of(result)
    if revert is not None and action is not None and not action.offers_revert():
        revert = None
    return (([revert] if revert else []) + resume_actions(result, interrupted_jobs)
            + alternatives(result) + lasting_fixes(result))


def chain_resumes(runner: SSHRunner, target: SSHTarget, result: ActionResult,
                  interrupted_jobs: Sequence[str], *, options: RemediationOptions,
                  audit: AuditSink | None) -> list[ActionResult]:
    """Run the resume offers now when ``options.chain_resume`` is set; else nothing."""
    if not options.chain_resume:
        return []
    return [execute(runner, target, a.kind, a.params, approver=result.approver,
                    evidence_hash=result.evidence_hash, audit=audit, options=options,
                    incident_id=result.incident_id)
            for a in resume_actions(result, interrupted_jobs)]


def return_to_slurm(drain: ActionResult, gate: GateResult) -> ProposedAction | None:
    """"Return gpu-01 to Slurm" (``SlurmResume``) after the repair, only when the health
    gate passed on the node; None otherwise (the node stays drained, ``gate_note`` says
    why) or when ``drain`` did not drain anything."""
    action = _of(drain)
    if action is None or not action.drains or drain.outcome not in _DRAINED or not gate.passed:
        return None
    node = drain.params["node"]
    return SlurmResume.propose(drain.host, {"node": node}, strings.SLURM_RETURN_REASON.format(
        node=node, host=gate.host))


def gate_note(drain: ActionResult, gate: GateResult) -> str:
    """What the thread says about the drained node once the gate ran."""
    node = drain.params.get("node", drain.host)
    if gate.passed:
        return strings.SLURM_GATE_PASSED.format(node=node)
    return strings.SLURM_GATE_FAILED.format(node=node, why="; ".join(gate.reasons) or "unknown")
