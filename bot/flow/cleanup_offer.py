"""A ``disk_full`` diagnosis gains its ``disk.cleanup`` proposals: what an ML host keeps on
disk that can go (caches, old checkpoints, core dumps, rotated logs), largest first until
the bytes the full filesystem needs are reached, never a paused or queued job's output,
an open file, or a path outside the host's allowed prefixes. The plan says what it keeps
(each run's newest checkpoints) and, when what may go cannot reach the need, by how much
it falls short (``disk.cleanup_short``): a cleanup that knowingly falls short says so.

One proposal deletes all chosen items; one more per category (per item when they are few
and of one kind) lets a person approve only the Hugging Face cache, say. The chosen items
are kept as an info finding (``disk.cleanup_candidates``) so the thread's preview table
and the message's sentences are rendered from the stored diagnosis.

It is computed where the playbook runs (``hosts.diagnose``), so the act step's re-probe
asks the same question and acts only while the same files are still the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from bot.core import fmt, strings
from bot.domain.findings import Diagnosis, Finding, ProposedAction, Severity
from bot.remediation import cleanup as cl
from bot.remediation.actions.disk_cleanup import PART_PREFIX as PART_PREFIX
from bot.remediation.actions.disk_cleanup import DiskCleanup
from bot.remediation.readings import read_disk_avail
from bot.ssh.base import SSHRunner, SSHTarget

FULL_CODE = "disk.full"
CANDIDATES_CODE = "disk.cleanup_candidates"
SHORT_CODE = "disk.cleanup_short"
PREVIEW_LINES = 8
MAX_PARTS = 5  # one button each; the five categories fit one actions row
PER_ITEM_UP_TO = 3  # one category with this few items: one button per item


def mount_need(f: Finding, full_pct: float) -> int:
    """Bytes to free so the finding's filesystem drops under ``full_pct`` (pure)."""
    fs = f.evidence.get("filesystem") or {}
    used, avail = fs.get("used"), fs.get("avail")
    if isinstance(used, int) and isinstance(avail, int):
        return max(0, used - int((used + avail) * full_pct / 100))
    return 0


def need_bytes(diagnosis: Diagnosis, full_pct: float) -> int:
    """Bytes to free so every full filesystem drops under ``full_pct`` (pure)."""
    return sum(mount_need(f, full_pct) for f in diagnosis.findings if f.code == FULL_CODE)


def target_mount(diagnosis: Diagnosis, full_pct: float, alerted: str = "") -> tuple[str, int]:
    """The full mount a cleanup acts on and the bytes it needs (pure): the one the alert
    named, else the one that needs the most; ("", 0) when that mount is not full."""
    full = {str((f.evidence.get("filesystem") or {}).get("mount", "")): mount_need(f, full_pct)
            for f in diagnosis.findings if f.code == FULL_CODE}
    if alerted:
        return (alerted, full[alerted]) if alerted in full else ("", 0)
    return max(full.items(), key=lambda kv: kv[1], default=("", 0))


def home(path: str, mounts: Sequence[str]) -> str:
    """The mount ``path`` lives on: the longest mount point that contains it (pure)."""
    return max((m for m in mounts if m == "/" or path == m or cl.under(path, [m])),
               key=len, default="/")


def search_roots(mount: str, allowed: Sequence[str], mounts: Sequence[str]) -> list[str]:
    """Where to look on ``mount`` (pure): each allowed prefix that lives on it, or the
    mount itself when an allowed prefix contains it. ``find -xdev`` keeps each search on
    its own filesystem, and nothing on another mount is searched at all."""
    roots = {p.rstrip("/") or "/" for p in allowed if home(p.rstrip("/") or "/", mounts) == mount}
    roots |= {mount for p in allowed if mount == p.rstrip("/") or cl.under(mount, [p])}
    return sorted(r for r in roots if not any(r != o and (o == "/" or cl.under(r, [o]))
                                              for o in roots))


def on_mount(files: Sequence[cl.CleanupCandidate], mount: str,
             mounts: Sequence[str]) -> list[cl.CleanupCandidate]:
    """The candidates whose every file lives on ``mount`` (pure)."""
    return [c for c in files if all(home(p, mounts) == mount for p in c.paths)]


def with_cleanup(diagnosis: Diagnosis, runner: SSHRunner, target: SSHTarget, *,
                 allowed: Sequence[str], protected: Sequence[str],
                 full_pct: float, now: float, alerted: str = "") -> Diagnosis:
    """``diagnosis`` plus the cleanup proposals and their preview, when the alerted (else
    the fullest) filesystem is full and something on it may go; unchanged otherwise."""
    mount, need = target_mount(diagnosis, full_pct, alerted)
    if not mount:
        return diagnosis
    mounts = list(read_disk_avail(runner, target, 30.0))
    roots = search_roots(mount, allowed, mounts)
    files = cl.find_files(runner, target, roots, 30.0)[0] if roots else []
    files = [f for f in files if home(f.path, mounts) == mount]
    busy = cl.open_files(runner, target, [f.path for f in files], 30.0)
    found = cl.plan_candidates(files, allowed=roots, protected=protected, open_paths=busy,
                               keep_checkpoints=cl.KEEP_CHECKPOINTS)
    chosen = cl.choose(on_mount(found, mount, mounts), need)
    kept = cl.kept_checkpoints(files, cl.KEEP_CHECKPOINTS)
    notes = [short_finding(mount, roots or allowed, chosen, need)] if \
        sum(c.size for c in chosen) < need else []
    if not chosen:
        return replace(diagnosis, findings=(*diagnosis.findings, *notes))
    where = {"mount": mount, "full_pct": str(int(full_pct))}
    actions = [proposal(target.name, chosen, need, now, where),
               *parts(target.name, chosen, need, where)]
    return replace(diagnosis, findings=(*diagnosis.findings,
                                        preview_finding(chosen, need, now, kept), *notes),
                   actions=(*diagnosis.actions, *actions))


def short_finding(mount: str, roots: Sequence[str], chosen: Sequence[cl.CleanupCandidate],
                  need: int) -> Finding:
    """What may go under the allowed paths cannot reach what ``mount`` needs: by how much
    (pure). The person knows before approving that the disk stays full."""
    have = sum(c.size for c in chosen)
    where = ", ".join(roots)
    title = (strings.FLOW_CLEANUP_SHORT if chosen else strings.FLOW_CLEANUP_NONE).format(
        mount=mount, where=where, have=fmt.size(have), need=fmt.size(need),
        gap=fmt.size(need - have))
    return Finding(SHORT_CODE, Severity.WARNING, title,
                   evidence={"mount": mount, "roots": list(roots), "have_bytes": have,
                             "need_bytes": need, "gap_bytes": need - have})


def proposal(host: str, chosen: Sequence[cl.CleanupCandidate], need: int,
             now: float, where: dict[str, str] | None = None) -> ProposedAction:
    """One cleanup for all chosen items: verified only once ``where``'s mount is
    under its threshold (``need`` is what that takes; the items may hold less)."""
    total = sum(c.size for c in chosen)
    params = {"paths": cl.paths_param(chosen), "need_bytes": str(need), **(where or {})}
    lines = "\n".join(cl.preview(chosen[:PREVIEW_LINES], now=now))
    reason = strings.FLOW_CLEANUP_REASON.format(n=len(chosen), size=fmt.size(total),
                                                need=fmt.size(need), preview=lines)
    return DiskCleanup.propose(host, params, reason)


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


def parts(host: str, chosen: Sequence[cl.CleanupCandidate], need: int,
          where: dict[str, str] | None = None) -> list[ProposedAction]:
    """One cleanup per part; like the whole, verified against the mount."""
    out = []
    for group in groups(chosen):
        total = sum(c.size for c in group)
        params = {"paths": cl.paths_param(group), "need_bytes": str(need), **(where or {})}
        what = group[0].label if len(group) == 1 else group[0].category
        out.append(DiskCleanup.part(host, params, strings.FLOW_CLEANUP_PART_REASON.format(
            what=what, n=len(group), size=fmt.size(total))))
    return out


def preview_finding(chosen: Sequence[cl.CleanupCandidate], need: int, now: float,
                    kept: Mapping[str, list[str]] | None = None) -> Finding:
    """The chosen items as stored evidence: what the thread's table is rendered from, and
    the checkpoints each run keeps (its newest ones: a run can go on from them)."""
    total = sum(c.size for c in chosen)
    items: list[dict[str, Any]] = [
        {"label": c.label, "category": c.category, "size": c.size,
         "age_s": int(max(now - c.mtime, 0)), "owner": c.owner, "paths": list(c.paths)}
        for c in chosen]
    return Finding(CANDIDATES_CODE, Severity.INFO,
                   strings.FLOW_CLEANUP_FOUND.format(n=len(chosen), size=fmt.size(total)),
                   evidence={"items": items, "total_bytes": total, "need_bytes": need,
                             "kept": {run: list(e) for run, e in (kept or {}).items()},
                             "keep_per_run": cl.KEEP_CHECKPOINTS})


def rest(diagnosis: Diagnosis, done_paths: str) -> list[ProposedAction]:
    """The parts of the stored proposal that a cleanup which deleted ``done_paths`` left
    (pure): offered again after one part, so a person can go on part by part."""
    done = set(done_paths.split(cl.SEP))
    return [a for a in diagnosis.actions
            if DiskCleanup.is_part(a) and not done & set(a.params.get("paths", "").split(cl.SEP))]
