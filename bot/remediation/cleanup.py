"""ML-aware disk cleanup for ``disk_full``: what an ML host keeps on disk that can go.

Candidates are found with one read-only ``find`` per allowed prefix (the
``playbooks.probes.cleanup_files`` probe): Hugging Face (any ``HF_HOME``'s ``hub/``) and
torch hub caches, pip caches, old checkpoints (``checkpoints/RUN/ENTRY`` or a Trainer's
``RUN/checkpoint-N``; the newest N entries of each run directory are kept), core dumps,
rotated logs. Each is ranked by size with its age and owner. What is
never proposed: anything outside the host's allowed prefixes, the output directory of a
paused or queued job, a file a process holds open (``lsof``), a name the catalog's
path grammar rejects (hostile text is never put on a command line). ``choose`` picks
the largest first until the bytes needed are covered; the result is the ``paths`` of
one ``disk.cleanup`` action (or one action per item, for per-item approval).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.core import fmt
from bot.remediation.probe_runner import run_probes
from bot.ssh.base import SSHRunner, SSHTarget
from playbooks import probes
from playbooks.parsers.disk import FileSeen

if TYPE_CHECKING:
    from storage.jobs import JobStore

SEP = "|"  # not in the path grammar, so it can join paths in one parameter


@dataclass(frozen=True)
class CleanupCandidate:
    """One item of the preview: a file, or one checkpoint entry with all its files."""

    category: str  # hf_cache | torch_hub | pip_cache | checkpoint | core_dump | rotated_log
    label: str
    paths: tuple[str, ...]
    size: int
    mtime: float
    owner: str


_HF_HUB = re.compile(r"/huggingface/hub/|/hub/(?:models|datasets|spaces)--")
_TRAINER_CHECKPOINT = re.compile(r"^(?P<run>.+)/(?P<entry>checkpoint-\d+)/")
_ROTATED_LOG = re.compile(r"\.log\.\d+(?:\.gz)?$|/log/[^/]+\.\d+\.gz$")


def category(path: str) -> str | None:
    if _HF_HUB.search(path):
        return "hf_cache"
    if "/torch/hub/" in path:
        return "torch_hub"
    if "/pip/" in path:
        return "pip_cache"
    if "/checkpoints/" in path or _TRAINER_CHECKPOINT.match(path):
        return "checkpoint"
    name = path.rsplit("/", 1)[-1]
    if "/coredump/" in path or name == "core" or name.startswith("core."):
        return "core_dump"
    if _ROTATED_LOG.search(path):
        return "rotated_log"
    return None


def under(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d.rstrip("/") or path.startswith(d.rstrip("/") + "/") for d in dirs)


def _checkpoint_entry(path: str) -> tuple[str, str] | None:
    """``.../checkpoints/RUN/ENTRY[/...]`` or a Trainer's ``.../RUN/checkpoint-N/...`` →
    (run dir, entry path)."""
    trainer = _TRAINER_CHECKPOINT.match(path)
    if trainer and "/checkpoints/" not in path:
        return trainer["run"], f"{trainer['run']}/{trainer['entry']}"
    head, _, tail = path.partition("/checkpoints/")
    parts = tail.split("/")
    if len(parts) < 2:
        return None
    run = f"{head}/checkpoints/{parts[0]}"
    return run, f"{run}/{parts[1]}"


def _group_checkpoints(files: list[FileSeen], keep: int) -> list[CleanupCandidate]:
    entries: dict[str, dict[str, list[FileSeen]]] = defaultdict(lambda: defaultdict(list))
    for f in files:
        where = _checkpoint_entry(f.path)
        if where:
            entries[where[0]][where[1]].append(f)
    out = []
    for run in entries.values():
        newest_first = sorted(run.items(), key=lambda kv: -max(f.mtime for f in kv[1]))
        for entry, group in newest_first[keep:]:
            out.append(CleanupCandidate("checkpoint", entry, tuple(sorted(f.path for f in group)),
                                 sum(f.size for f in group), max(f.mtime for f in group),
                                 group[0].owner))
    return out


def kept_checkpoints(files: Sequence[FileSeen], keep: int) -> dict[str, list[str]]:
    """Per run directory, the newest ``keep`` checkpoint entries a cleanup leaves (pure):
    what the plan says it keeps, and why (they are the run's latest)."""
    entries: dict[str, dict[str, float]] = defaultdict(dict)
    for f in files:
        where = _checkpoint_entry(f.path) if category(f.path) == "checkpoint" else None
        if where:
            entries[where[0]][where[1]] = max(entries[where[0]].get(where[1], 0.0), f.mtime)
    return {run: [e for e, _ in sorted(got.items(), key=lambda kv: -kv[1])[:keep]]
            for run, got in sorted(entries.items())}


def plan_candidates(files: Sequence[FileSeen], *, allowed: Sequence[str],
                    protected: Sequence[str], open_paths: set[str],
                    keep_checkpoints: int = 2) -> list[CleanupCandidate]:
    """Pure: the files that may go, grouped and ranked by size (largest first)."""
    safe = [f for f in files if under(f.path, allowed) and not under(f.path, protected)
            and f.path not in open_paths and category(f.path)]
    checkpoints = [f for f in safe if category(f.path) == "checkpoint"]
    out = [CleanupCandidate(str(category(f.path)), f.path, (f.path,), f.size, f.mtime, f.owner)
           for f in safe if category(f.path) != "checkpoint"]
    out += [c for c in _group_checkpoints(checkpoints, keep_checkpoints)
            if not any(p in open_paths for p in c.paths)]
    return sorted(out, key=lambda c: (-c.size, c.mtime, c.label))  # equal sizes: oldest first


def choose(candidates: Sequence[CleanupCandidate], need_bytes: int) -> list[CleanupCandidate]:
    """Largest first until ``need_bytes`` are covered (all of them if they do not suffice)."""
    chosen, total = [], 0
    for c in candidates:
        if total >= need_bytes:
            break
        chosen.append(c)
        total += c.size
    return chosen


def open_files(runner: SSHRunner, target: SSHTarget, paths: Sequence[str],
               timeout_s: float) -> set[str]:
    """The paths some process holds open (``lsof -t -- PATH`` prints its PIDs)."""
    results = run_probes(runner, target, [probes.open_by(p) for p in paths], timeout_s) \
        if paths else []
    return {p for p, (r, pids) in zip(paths, results, strict=True) if r.ok and pids}


def find_files(runner: SSHRunner, target: SSHTarget, allowed: Sequence[str],
               timeout_s: float) -> tuple[list[FileSeen], int]:
    files: list[FileSeen] = []
    unsafe = 0
    # exit 1 for an unreadable subdir is normal: what was printed stands
    for _, (seen, bad) in run_probes(runner, target, [probes.cleanup_files(p) for p in allowed],
                                     timeout_s):
        files += seen
        unsafe += bad
    return files, unsafe


KEEP_CHECKPOINTS = 2  # the newest entries of each run directory a cleanup never proposes


def candidates(runner: SSHRunner, target: SSHTarget, *, allowed: Sequence[str],
               protected: Sequence[str], keep_checkpoints: int = KEEP_CHECKPOINTS,
               timeout_s: float = 30.0) -> list[CleanupCandidate]:
    """The preview for the thread: read-only probes, then ``plan_candidates``."""
    files, _ = find_files(runner, target, allowed, timeout_s)
    busy = open_files(runner, target, [f.path for f in files], timeout_s)
    return plan_candidates(files, allowed=allowed, protected=protected, open_paths=busy,
                           keep_checkpoints=keep_checkpoints)


def unfinished_output_dirs(jobs: JobStore, host: str) -> tuple[str, ...]:
    """Output directories of ``host``'s unfinished jobs (queued, running, paused,
    interrupted, failed): what a cleanup must never delete, for the flow and the CLI alike."""
    from bot.jobs.book import JobBook  # kept lazy like the flow's

    return JobBook(jobs).unfinished_output_dirs(host)


def paths_param(chosen: Sequence[CleanupCandidate]) -> str:
    return SEP.join(p for c in chosen for p in c.paths)


def preview(chosen: Sequence[CleanupCandidate], now: float) -> list[str]:
    """One line per item for the thread: size, age, owner, what it is."""

    return [f"{fmt.size(c.size):>10}  {max(now - c.mtime, 0) / 86400:5.0f} d  {c.owner:<8} "
            f"{c.category:<10} {c.label}" for c in chosen]
