"""Slurm drain and resume: read the node, refuse what is not ours, prove the new state.

The node is read with ``scontrol show node -o NODE`` and its jobs with ``squeue`` on the
host itself, over the action's SSH connection, without ``sudo`` (both are read-only;
only ``scontrol update`` needs the sudoers line). A drain is refused when a person
already drained the node (their reason stays; the refusal shows it) or another incident
did (said, not overwritten). Verification reads the node back: DRAIN set with this
incident in the reason (DRAINING while jobs run, DRAINED once they ended), or, for a
resume, a usable node with no reason. The jobs still on the node are in the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from bot.core import fmt, strings
from bot.domain.action_result import Verification
from bot.domain.host_state import CapturedState, SlurmCapture
from bot.domain.slurm import DrainedNode
from bot.remediation.polling import ActionRun, Look, poll
from bot.remediation.preflight import Refusal
from bot.remediation.probe_runner import ProbeFailed, run_probe, run_probes, tool_words
from bot.ssh.base import SSHError, SSHRunner, SSHTarget
from playbooks import probes
from playbooks.parsers.slurm import SlurmJob, SlurmNode, left_seconds, reason_epoch

KINDS = ("slurm.drain", "slurm.resume", "slurm.requeue", "slurm.cancel")
JOB_KINDS = ("slurm.requeue", "slurm.cancel")


def read_status(runner: SSHRunner, target: SSHTarget, node: str,
                timeout_s: float) -> SlurmCapture:
    """The node and its jobs, read together; ``ProbeFailed`` when Slurm cannot say."""
    (show, parsed), (queue, jobs) = run_probes(runner, target, [
        probes.slurm_node(node), probes.slurm_jobs(node)], timeout_s)
    if not show.ok or parsed is None or parsed.name != node:
        why = (show.stderr or show.stdout or show.error or f"exit {show.exit_status}").strip()
        raise ProbeFailed(show, strings.SLURM_NOT_FOUND.format(node=node, why=why[:200]))
    if not queue.ok:
        raise ProbeFailed(queue, tool_words(queue))
    return SlurmCapture(parsed, tuple(jobs))


def job_text(job: SlurmJob) -> str:
    secs = left_seconds(job.time_left)
    if secs is None:
        return strings.SLURM_JOB_UNLIMITED.format(id=job.job_id, user=job.user, name=job.name)
    return strings.SLURM_JOB.format(id=job.job_id, user=job.user, name=job.name,
                                    left=fmt.duration(secs))


def describe(status: SlurmCapture) -> str:
    """``node gpu-01 is DRAINING; reason: ...; 1 job(s) still run there: 12 (alice, ...)``."""
    node = status.node
    parts = [strings.SLURM_NODE_NOW.format(node=node.name, view=node.view)]
    if node.reason:
        parts.append(strings.SLURM_REASON_NOW.format(reason=node.reason))
    if status.jobs:
        jobs = "; ".join(job_text(j) for j in status.jobs)
        parts.append(strings.SLURM_JOBS.format(n=len(status.jobs), jobs=jobs))
    else:
        parts.append(strings.SLURM_JOBS_NONE)
    return "; ".join(parts)


def _ours(node: SlurmNode, incident: str) -> bool:
    """Drained by the bot for this incident (or, without one, by the bot at all)."""
    return node.by_bot and node.incident == (incident or None)


def checks(ctx: ActionRun, captured: CapturedState) -> Refusal | None:
    """A person's reason is never overwritten or cleared; another incident's is said."""
    if captured.slurm is None:
        return None
    if ctx.spec.kind in JOB_KINDS:
        return _job_here(ctx.params["job"], captured.slurm)
    node = captured.slurm.node
    who = node.reason_user or "unknown"
    if ctx.spec.kind == "slurm.drain" and (node.reason or node.drain) and not node.by_bot:
        return Refusal(strings.SLURM_DRAINED_BY_PERSON.format(  # DOWN and FAIL's reasons too
            node=node.name, view=node.view, reason=node.reason or "none", who=who))
    if not node.drain:
        return None
    if ctx.spec.kind == "slurm.drain" and not _ours(node, ctx.params.get("incident", "")):
        return Refusal(strings.SLURM_DRAINED_BY_OTHER.format(
            node=node.name, view=node.view, other=node.incident or "another incident",
            reason=node.reason))
    if ctx.spec.kind == "slurm.resume" and node.reason and not node.by_bot:
        return Refusal(strings.SLURM_RESUME_PERSON.format(node=node.name, reason=node.reason,
                                                          who=who))
    return None


def _job_here(job: str, status: SlurmCapture) -> Refusal | None:
    """A job is requeued or cancelled only where the diagnosis saw it: on this node."""
    if any(j.job_id == job for j in status.jobs):
        return None
    running = ", ".join(j.job_id for j in status.jobs) or "none"
    return Refusal(strings.SLURM_JOB_NOT_HERE.format(job=job, node=status.node.name,
                                                     jobs=running))


def skip(step: str, captured: CapturedState, params: dict[str, str]) -> str | None:
    """Why ``drain``/``resume`` need not run: the node is already so."""
    if captured.slurm is None:
        return None
    node = captured.slurm.node
    if step == "drain" and node.drain and _ours(node, params.get("incident", "")):
        return strings.SLURM_ALREADY_DRAINED
    if step == "resume" and not node.drain and node.usable and not node.reason:
        return strings.SLURM_NOT_DRAINED
    return None


def _goal(kind: str, params: dict[str, str], status: SlurmCapture) -> bool:
    node = status.node
    if kind == "slurm.drain":
        return node.drain and _ours(node, params.get("incident", ""))
    if kind in JOB_KINDS:
        return all(j.job_id != params["job"] for j in status.jobs)
    return node.usable and not node.reason


def _evidence(status: SlurmCapture) -> dict[str, Any]:
    return {"node": {**asdict(status.node), "view": status.node.view},
            "jobs": [asdict(j) for j in status.jobs]}


def verify_slurm(ctx: ActionRun, captured: CapturedState, patient: bool = True) -> Verification:
    """Read the node back until it is as the action meant (twice, ``settle_s`` apart)."""
    node = ctx.params["node"]
    t = ctx.options.probe_timeout_s

    def look() -> Look:
        status = read_status(ctx.runner, ctx.target, node, t)
        return Look(_goal(ctx.spec.kind, ctx.params, status), None,
                    {**_evidence(status), "detail": describe(status)})

    seen, elapsed = poll(ctx, look, patient)
    ev = dict(seen.evidence)
    return Verification(seen.done, str(ev.pop("detail", "")), elapsed, evidence=ev)


def revert_params(captured: CapturedState | None) -> dict[str, str] | None:
    """``slurm.resume`` puts back a node the drain took out (captured usable before)."""
    if captured is None or captured.slurm is None or captured.slurm.node.drain:
        return None
    return {"node": captured.slurm.node.name}


def drained_nodes(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> list[SlurmNode]:
    """Every node of the cluster that is draining or drained, with its reason, who set
    it and when (one Slurm host answers for the whole cluster): for ``/ir drained``, the
    digest and the Home tab."""
    result, nodes = run_probe(runner, target, probes.slurm_nodes(), timeout_s)
    if not result.ok:
        raise ProbeFailed(result, tool_words(result))
    return [n for n in nodes if n.drain]


def overdue(nodes: list[SlurmNode], now: float, max_age_s: float, open_incidents: set[str],
            utc_offset_s: float = 0.0) -> list[SlurmNode]:
    """Nodes the bot drained more than ``max_age_s`` ago whose incident is no longer
    open: what escalation fires for, so that drained nodes do not pile up unread."""
    out = []
    for node in nodes:
        since = reason_epoch(node, utc_offset_s)
        if (node.by_bot and since is not None and now - since > max_age_s
                and node.incident not in open_incidents):
            out.append(node)
    return out


def as_drained(node: SlurmNode, utc_offset_s: float = 0.0) -> DrainedNode:
    return DrainedNode(node.name, node.view, node.reason_user or "unknown", node.reason,
                       reason_epoch(node, utc_offset_s), node.by_bot, node.incident)


def drained_list(runner: SSHRunner, target: SSHTarget, timeout_s: float) -> list[DrainedNode]:
    """``drained_nodes`` as the lists people read show them, by name."""
    nodes = drained_nodes(runner, target, timeout_s)
    return sorted((as_drained(n) for n in nodes), key=lambda d: d.name)


class DrainedCache:
    """The cluster's drained nodes, read over SSH at most once per ``ttl_s``: the Home tab
    re-renders on every change and the digest and escalation look too, and one read a
    minute is plenty for a list people glance at. ``target`` says which host answers
    (None: no Slurm host in the inventory, so nothing is drained)."""

    def __init__(self, runner: SSHRunner, target: Callable[[], SSHTarget | None],
                 timeout_s: float = 10.0, ttl_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runner = runner
        self.target = target
        self.timeout_s = timeout_s
        self.ttl_s = ttl_s
        self.clock = clock
        self._nodes: list[DrainedNode] = []
        self._at: float | None = None

    def read(self) -> list[DrainedNode]:
        """A fresh read now (``ProbeFailed``/``SSHError`` when Slurm cannot say)."""
        target = self.target()
        nodes = drained_list(self.runner, target, self.timeout_s) if target is not None else []
        self._nodes, self._at = nodes, self.clock()
        return nodes

    def cached(self) -> list[DrainedNode]:
        """The last read when younger than ``ttl_s``, else a new one; never raises (a
        failed read keeps the last list and tries again after ``ttl_s``)."""
        if self._at is not None and self.clock() - self._at < self.ttl_s:
            return list(self._nodes)
        try:
            return self.read()
        except (ProbeFailed, SSHError):
            self._at = self.clock()
            return list(self._nodes)
