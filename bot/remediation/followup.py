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
from bot.remediation.catalog import CATALOG
from bot.remediation.execute import AuditSink, execute
from bot.remediation.options import RemediationOptions
from bot.remediation.rollback import revert_kind
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.base import action_id
from playbooks.health_gate import GateResult

GPU_FREEING = tuple(k for k, spec in CATALOG.items() if spec.frees_gpus)  # then: resume
LASTING_AFTER = ("systemd.stop_disable",)  # the unit stays installed: its policy still matters
_DRAINED = (Outcome.SUCCEEDED, Outcome.TIMED_OUT_BUT_DONE, Outcome.NOOP)


def revert_action(result: ActionResult) -> ProposedAction | None:
    if not result.revertable or result.revert_params is None:
        return None
    params = dict(result.revert_params)
    kind = revert_kind(CATALOG[result.kind])
    return ProposedAction(id=action_id(result.host, kind, params), kind=kind, params=params,
                          reason=f"undo {result.kind}: back to the captured state",
                          risk=CATALOG[kind].risk)


def alternatives(result: ActionResult) -> list[ProposedAction]:
    """What a refused action proposed instead, and the ladder's next step after a failure."""
    from bot.remediation.ladder import next_step

    wanted = list(result.proposals)
    step = next_step(result)
    if step is not None:
        wanted.append(step)
    return [ProposedAction(id=action_id(result.host, p["kind"], p["params"]), kind=p["kind"],
                           params=dict(p["params"]), reason=p["reason"], risk=p["risk"])
            for p in wanted]


def lasting_fixes(result: ActionResult) -> list[ProposedAction]:
    """After a verified stop/disable of a unit systemd restarts by itself: the drop-in
    (Restart=on-failure, a start guard) so its next crash or re-enable does not take the
    GPUs again. Its own approval; nothing is proposed for a unit with Restart=no."""
    from bot.remediation.preflight import proposal

    if result.kind not in LASTING_AFTER or not result.ok or result.captured is None:
        return []
    unit = result.captured.unit(result.params.get("unit", ""))
    if unit is None or not unit.restarts:
        return []
    p = proposal("systemd.dropin", {"unit": unit.name},
                 strings.REM_LASTING_DROPIN.format(unit=unit.name, restart=unit.restart))
    return [] if p is None else [ProposedAction(
        id=action_id(result.host, p["kind"], p["params"]), kind=p["kind"],
        params=dict(p["params"]), reason=p["reason"], risk=p["risk"])]


def resume_actions(result: ActionResult, interrupted_jobs: Sequence[str]) -> list[ProposedAction]:
    """After GPUs were freed on a host with interrupted extractions: resume each."""
    if result.kind not in GPU_FREEING or not result.ok or result.outcome is Outcome.DRY_RUN:
        return []
    return [ProposedAction(id=action_id(result.host, "extraction.resume", {"job": job}),
                           kind="extraction.resume", params={"job": job},
                           reason=f"GPUs on {result.host} are free; job {job} was interrupted",
                           risk="restarts the extraction where it stopped")
            for job in interrupted_jobs]


def offers(result: ActionResult, interrupted_jobs: Sequence[str] = ()) -> list[ProposedAction]:
    """Everything the result message should offer, Revert first. A drained Slurm node is
    not offered back here: it returns only through the health gate (``return_to_slurm``)."""
    revert = revert_action(result)
    if revert is not None and revert.kind == "slurm.resume":
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
    """"Return gpu-01 to Slurm" (``slurm.resume``) after the repair, only when the health
    gate passed on the node; None otherwise (the node stays drained, ``gate_note`` says
    why) or when ``drain`` did not drain anything."""
    if drain.kind != "slurm.drain" or drain.outcome not in _DRAINED or not gate.passed:
        return None
    node = drain.params["node"]
    params = {"node": node}
    return ProposedAction(id=action_id(drain.host, "slurm.resume", params), kind="slurm.resume",
                          params=params, reason=strings.SLURM_RETURN_REASON.format(
                              node=node, host=gate.host),
                          risk=CATALOG["slurm.resume"].risk)


def gate_note(drain: ActionResult, gate: GateResult) -> str:
    """What the thread says about the drained node once the gate ran."""
    node = drain.params.get("node", drain.host)
    if gate.passed:
        return strings.SLURM_GATE_PASSED.format(node=node)
    return strings.SLURM_GATE_FAILED.format(node=node, why="; ".join(gate.reasons) or "unknown")
