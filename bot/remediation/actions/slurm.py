"""Slurm around a repair: drain the node, return it, requeue or cancel one of its jobs,
each through ``scontrol``/``scancel`` on the node over the action's SSH connection.

The node is read first (``bot.remediation.slurm.read_status``: a drain is never sent
blind). A drain is refused when a person already drained the node (their reason stays;
the refusal shows it) or another incident did (said, not overwritten); a resume is
refused while a person's reason is on the node; a job is requeued or cancelled only where
the diagnosis saw it. Verification reads the node back: DRAIN set with this incident in
the reason (DRAINING while jobs run, DRAINED once they ended), or, for a resume, a usable
node with no reason; a job's action, the job gone from the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import BeforeValidator

from bot.core import strings
from bot.domain import validate
from bot.domain.action_result import Seen, Verification
from bot.domain.host_state import CapturedState, SlurmCapture
from bot.domain.slurm import SlurmNode
from bot.remediation.actions.base import Action, ActionParams, ParamHelp, Refusal
from bot.remediation.polling import Look, poll
from bot.remediation.slurm import describe, read_status
from bot.remediation.spec import RemoteStep

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun

SLURM_BOT = "incident-bot"  # every drain reason the bot writes starts with it
Node = Annotated[str, BeforeValidator(validate.slurm_node),
                 ParamHelp("a Slurm node name, e.g. gpu-01")]
Job = Annotated[str, BeforeValidator(validate.slurm_job),
                ParamHelp("a Slurm job id running on that node")]


class NodeParams(ActionParams):
    node: Node


class DrainParams(ActionParams):
    node: Node
    reason: Annotated[str, BeforeValidator(validate.slurm_reason),
                      ParamHelp("why, in plain words (the finding)")]
    incident: Annotated[str, BeforeValidator(validate.incident_ref),
                        ParamHelp("the incident the reason names")] = ""


class JobParams(ActionParams):
    node: Node
    job: Job


def drain_reason(p: Mapping[str, str]) -> str:
    """``incident-bot INC-7: GPU 2 fell off the bus (Xid 79)``: who drained it and why."""
    incident = p.get("incident", "")
    return f"{SLURM_BOT} {incident}: {p['reason']}" if incident else f"{SLURM_BOT}: {p['reason']}"


def ours(node: SlurmNode, incident: str) -> bool:
    """Drained by the bot for this incident (or, without one, by the bot at all)."""
    return node.by_bot and node.incident == (incident or None)


def _evidence(status: SlurmCapture) -> dict[str, Any]:
    return {"node": {**asdict(status.node), "view": status.node.view},
            "jobs": [asdict(j) for j in status.jobs]}


class SlurmAction(Action):
    """What the Slurm kinds share: the node read before and after, polled until it is as
    the action meant (twice, ``settle_s`` apart)."""

    Params: ClassVar[type[ActionParams]] = NodeParams

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return f"Slurm node {p['node']}"

    def goal(self, p: Mapping[str, str], status: SlurmCapture) -> bool:
        raise NotImplementedError(self.kind)

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        node = ctx.params["node"]
        t = ctx.options.probe_timeout_s

        def look() -> Look:
            status = read_status(ctx.runner, ctx.target, node, t)
            return Look(self.goal(ctx.params, status), None,
                        {**_evidence(status), "detail": describe(status)})

        seen, elapsed = poll(ctx, look, patient)
        ev = dict(seen.evidence)
        return Verification(Seen.of(seen.done), str(ev.pop("detail", "")), elapsed,
                            evidence=ev)

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        return None


class SlurmResume(SlurmAction):
    """Return a drained node to the scheduler: only behind the health gate."""

    kind = "slurm.resume"
    title = strings.ACT_TITLE_SLURM_RESUME
    risk = strings.SLURM_RESUME_RISK
    returns_node = True  # the health gate runs again right before it
    phrase_template = strings.MSG_ACTION_SLURM_RESUME
    done_template = strings.MSG_DONE_SLURM_RESUME

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("resume", ("scontrol", "update", f"NodeName={p['node']}",
                                      "State=RESUME"), 15.0),)

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """A person's reason is never cleared."""
        node = captured.slurm.node if captured.slurm is not None else None
        if node is not None and node.drain and node.reason and not node.by_bot:
            return Refusal(strings.SLURM_RESUME_PERSON.format(
                node=node.name, reason=node.reason, who=node.reason_user or "unknown"))
        return None

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        node = captured.slurm.node if captured.slurm is not None else None
        if node is not None and not node.drain and node.usable and not node.reason:
            return strings.SLURM_NOT_DRAINED
        return None

    def goal(self, p: Mapping[str, str], status: SlurmCapture) -> bool:
        return status.node.usable and not status.node.reason


class SlurmDrain(SlurmAction):
    kind = "slurm.drain"
    title = strings.ACT_TITLE_SLURM_DRAIN
    risk = strings.SLURM_DRAIN_RISK
    Params = DrainParams
    revertable = True
    revert_kind = SlurmResume.kind
    drains = True
    # a drain's reason quotes the finding's words, which a fresh diagnosis may word
    # differently: it is not re-diagnosed before it runs
    reprobe_first = False
    phrase_template = strings.MSG_ACTION_SLURM_DRAIN
    done_template = strings.MSG_DONE_SLURM_DRAIN

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("drain", ("scontrol", "update", f"NodeName={p['node']}",
                                     "State=DRAIN", f"Reason={drain_reason(p)}"), 15.0),)

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """A person's reason is never overwritten; another incident's is said."""
        if captured.slurm is None:
            return None
        node = captured.slurm.node
        if (node.reason or node.drain) and not node.by_bot:
            return Refusal(strings.SLURM_DRAINED_BY_PERSON.format(  # DOWN and FAIL's reasons too
                node=node.name, view=node.view, reason=node.reason or "none",
                who=node.reason_user or "unknown"))
        if node.drain and not ours(node, ctx.params.get("incident", "")):
            return Refusal(strings.SLURM_DRAINED_BY_OTHER.format(
                node=node.name, view=node.view, other=node.incident or "another incident",
                reason=node.reason))
        return None

    def precheck(self, ctx: ActionRun, step: RemoteStep, captured: CapturedState) -> str | None:
        node = captured.slurm.node if captured.slurm is not None else None
        if node is not None and node.drain and ours(node, ctx.params.get("incident", "")):
            return strings.SLURM_ALREADY_DRAINED
        return None

    def goal(self, p: Mapping[str, str], status: SlurmCapture) -> bool:
        return status.node.drain and ours(status.node, p.get("incident", ""))

    def revert_params(self, captured: CapturedState | None) -> dict[str, str] | None:
        """``slurm.resume`` puts back a node the drain took out (captured usable before)."""
        if captured is None or captured.slurm is None or captured.slurm.node.drain:
            return None
        return {"node": captured.slurm.node.name}

    def offers_revert(self) -> bool:
        """A drained node returns only through the health gate (``return_to_slurm``)."""
        return False


class JobAction(SlurmAction):
    """A job on the node, through the scheduler (the bot never kills it)."""

    Params = JobParams

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return f"Slurm job {p['job']} on node {p['node']}"

    def preflight(self, ctx: ActionRun, captured: CapturedState) -> Refusal | None:
        """Only where the diagnosis saw it: on this node."""
        status = captured.slurm
        if status is None or any(j.job_id == ctx.params["job"] for j in status.jobs):
            return None
        running = ", ".join(j.job_id for j in status.jobs) or "none"
        return Refusal(strings.SLURM_JOB_NOT_HERE.format(job=ctx.params["job"],
                                                         node=status.node.name, jobs=running))

    def goal(self, p: Mapping[str, str], status: SlurmCapture) -> bool:
        return all(j.job_id != p["job"] for j in status.jobs)


class SlurmRequeue(JobAction):
    kind = "slurm.requeue"
    title = strings.ACT_TITLE_SLURM_REQUEUE
    risk = strings.SLURM_REQUEUE_RISK
    phrase_template = strings.MSG_ACTION_SLURM_REQUEUE
    done_template = strings.MSG_DONE_SLURM_REQUEUE

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("requeue", ("scontrol", "requeue", p["job"]), 15.0),)


class SlurmCancel(JobAction):
    kind = "slurm.cancel"
    title = strings.ACT_TITLE_SLURM_CANCEL
    risk = strings.SLURM_CANCEL_RISK
    phrase_template = strings.MSG_ACTION_SLURM_CANCEL
    done_template = strings.MSG_DONE_SLURM_CANCEL

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("scancel", ("scancel", p["job"]), 15.0),)
