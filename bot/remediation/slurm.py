"""Reading Slurm: a node and its jobs, the cluster's drained nodes, and who drained them.

The node is read with ``scontrol show node -o NODE`` and its jobs with ``squeue`` on the
host itself, over the action's SSH connection, without ``sudo`` (both are read-only;
only ``scontrol update`` needs the sudoers line). The Slurm actions
(``bot/remediation/actions/slurm.py``) read the node here before and after they act;
``/ir drained``, the digest, escalation and the Home tab read the drained nodes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.core import fmt, strings
from bot.domain.host_state import SlurmCapture
from bot.domain.slurm import DrainedNode
from bot.remediation.probe_runner import ProbeFailed, run_probe, run_probes, tool_words
from bot.ssh.base import SSHError, SSHRunner, SSHTarget
from playbooks import probes
from playbooks.parsers.slurm import SlurmJob, SlurmNode, left_seconds, reason_epoch


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
