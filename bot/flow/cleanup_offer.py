"""A ``disk_full`` diagnosis gains one ``disk.cleanup`` proposal: what an ML host keeps on
disk that can go (caches, old checkpoints, core dumps), largest first, never a paused or
queued job's output, an open file, or a path outside the host's allowed prefixes.

It is computed where the playbook runs (``hosts.diagnose``), so the act step's re-probe
asks the same question and acts only while the same files are still the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from bot.core import strings
from bot.domain.findings import Diagnosis, ProposedAction
from bot.remediation import catalog
from bot.remediation import cleanup as cl
from bot.remediation.verify_more import human
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.base import action_id

FULL_CODE = "disk.full"
PREVIEW_LINES = 8


def need_bytes(diagnosis: Diagnosis, full_pct: float) -> int:
    """Bytes to free so every full filesystem drops under ``full_pct`` (pure)."""
    need = 0
    for f in diagnosis.findings:
        if f.code != FULL_CODE:
            continue
        fs = f.evidence.get("filesystem") or {}
        used, avail = fs.get("used"), fs.get("avail")
        if isinstance(used, int) and isinstance(avail, int):
            need += max(0, used - int((used + avail) * full_pct / 100))
    return need


def with_cleanup(diagnosis: Diagnosis, runner: SSHRunner, target: SSHTarget, *,
                 allowed: Sequence[str], protected: Sequence[str],
                 full_pct: float, now: float) -> Diagnosis:
    """``diagnosis`` plus the cleanup proposal, when a filesystem is full and something
    may go; unchanged otherwise."""
    if not any(f.code == FULL_CODE for f in diagnosis.findings):
        return diagnosis
    found = cl.candidates(runner, target, allowed=allowed, protected=protected)
    chosen = cl.choose(found, need_bytes(diagnosis, full_pct))
    if not chosen:
        return diagnosis
    action = proposal(target.name, chosen, need_bytes(diagnosis, full_pct), now)
    return replace(diagnosis, actions=(*diagnosis.actions, action))


def proposal(host: str, chosen: Sequence[cl.CleanupCandidate], need: int,
             now: float) -> ProposedAction:
    """One ``disk.cleanup`` for all chosen items; it must free what they hold (or ``need``
    when they hold more)."""
    total = sum(c.size for c in chosen)
    params = {"paths": cl.paths_param(chosen), "need_bytes": str(min(need, total))}
    lines = "\n".join(cl.preview(chosen[:PREVIEW_LINES], now=now))
    reason = strings.FLOW_CLEANUP_REASON.format(n=len(chosen), size=human(total),
                                                need=human(need), preview=lines)
    return ProposedAction(action_id(host, "disk.cleanup", params), "disk.cleanup", params,
                          reason, catalog.CATALOG["disk.cleanup"].risk)
