"""A ``disk_full`` diagnosis gains its ``disk.cleanup`` proposals: what an ML host keeps on
disk that can go (caches, old checkpoints, core dumps), largest first, never a paused or
queued job's output, an open file, or a path outside the host's allowed prefixes.

One proposal deletes all chosen items; one more per category (per item when they are few
and of one kind) lets a person approve only the Hugging Face cache, say. The chosen items
are kept as an info finding (``disk.cleanup_candidates``) so the thread's preview table
and the message's sentences are rendered from the stored diagnosis.

It is computed where the playbook runs (``hosts.diagnose``), so the act step's re-probe
asks the same question and acts only while the same files are still the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bot.core import fmt, strings
from bot.domain.findings import Diagnosis, Finding, ProposedAction, Severity
from bot.remediation import catalog
from bot.remediation import cleanup as cl
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks.base import action_id

FULL_CODE = "disk.full"
CANDIDATES_CODE = "disk.cleanup_candidates"
PART_PREFIX = "cleanup-part-"  # the id of a per-category (or per-item) proposal
PREVIEW_LINES = 8
MAX_PARTS = 5  # one button each; the five categories fit one actions row
PER_ITEM_UP_TO = 3  # one category with this few items: one button per item


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
    """``diagnosis`` plus the cleanup proposals and their preview, when a filesystem is
    full and something may go; unchanged otherwise."""
    if not any(f.code == FULL_CODE for f in diagnosis.findings):
        return diagnosis
    found = cl.candidates(runner, target, allowed=allowed, protected=protected)
    need = need_bytes(diagnosis, full_pct)
    chosen = cl.choose(found, need)
    if not chosen:
        return diagnosis
    actions = [proposal(target.name, chosen, need, now), *parts(target.name, chosen, need)]
    return replace(diagnosis, findings=(*diagnosis.findings, preview_finding(chosen, need, now)),
                   actions=(*diagnosis.actions, *actions))


def proposal(host: str, chosen: Sequence[cl.CleanupCandidate], need: int,
             now: float) -> ProposedAction:
    """One ``disk.cleanup`` for all chosen items; it must free what they hold (or ``need``
    when they hold more)."""
    total = sum(c.size for c in chosen)
    params = {"paths": cl.paths_param(chosen), "need_bytes": str(min(need, total))}
    lines = "\n".join(cl.preview(chosen[:PREVIEW_LINES], now=now))
    reason = strings.FLOW_CLEANUP_REASON.format(n=len(chosen), size=fmt.size(total),
                                                need=fmt.size(need), preview=lines)
    return ProposedAction(action_id(host, "disk.cleanup", params), "disk.cleanup", params,
                          reason, catalog.CATALOG["disk.cleanup"].risk)


def groups(chosen: Sequence[cl.CleanupCandidate]) -> list[list[cl.CleanupCandidate]]:
    """The parts a person may approve alone (pure): one per category, largest first; one
    per item when a few items share one category; none when one part would be the whole."""
    by_cat: dict[str, list[cl.CleanupCandidate]] = {}
    for c in chosen:
        by_cat.setdefault(c.category, []).append(c)
    if len(by_cat) == 1:
        return [[c] for c in chosen] if 1 < len(chosen) <= PER_ITEM_UP_TO else []
    ranked = sorted(by_cat.values(), key=lambda g: -sum(c.size for c in g))
    return ranked[:MAX_PARTS]


def parts(host: str, chosen: Sequence[cl.CleanupCandidate], need: int) -> list[ProposedAction]:
    """One ``disk.cleanup`` per part; each must free what its own files hold."""
    out = []
    for group in groups(chosen):
        total = sum(c.size for c in group)
        params = {"paths": cl.paths_param(group), "need_bytes": str(min(need, total))}
        what = group[0].label if len(group) == 1 else group[0].category
        out.append(ProposedAction(PART_PREFIX + action_id(host, "disk.cleanup", params)[:10],
                                  "disk.cleanup", params,
                                  strings.FLOW_CLEANUP_PART_REASON.format(
                                      what=what, n=len(group), size=fmt.size(total)),
                                  catalog.CATALOG["disk.cleanup"].risk))
    return out


def preview_finding(chosen: Sequence[cl.CleanupCandidate], need: int, now: float) -> Finding:
    """The chosen items as stored evidence: what the thread's table is rendered from."""
    total = sum(c.size for c in chosen)
    items: list[dict[str, Any]] = [
        {"label": c.label, "category": c.category, "size": c.size,
         "age_s": int(max(now - c.mtime, 0)), "owner": c.owner, "paths": list(c.paths)}
        for c in chosen]
    return Finding(CANDIDATES_CODE, Severity.INFO,
                   strings.FLOW_CLEANUP_FOUND.format(n=len(chosen), size=fmt.size(total)),
                   evidence={"items": items, "total_bytes": total, "need_bytes": need})


def rest(diagnosis: Diagnosis, done_paths: str) -> list[ProposedAction]:
    """The parts of the stored proposal that a cleanup which deleted ``done_paths`` left
    (pure): offered again after one part, so a person can go on part by part."""
    done = set(done_paths.split(cl.SEP))
    return [a for a in diagnosis.actions
            if a.kind == "disk.cleanup" and a.id.startswith(PART_PREFIX)
            and not done & set(a.params.get("paths", "").split(cl.SEP))]
