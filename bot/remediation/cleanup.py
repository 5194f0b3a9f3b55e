"""ML-aware disk cleanup for ``disk_full``: what an ML host keeps on disk that can go.

Candidates are found with one read-only ``find`` per allowed prefix: Hugging Face and
torch hub caches, pip caches, old checkpoints (the newest N entries of each run
directory are kept), core dumps. Each is ranked by size with its age and owner. What is
never proposed: anything outside the host's allowed prefixes, the output directory of a
paused or queued job, a file a process holds open (``lsof``), a name the catalog's
path grammar rejects (hostile text is never put on a command line). ``choose`` picks
the largest first until the bytes needed are covered; the result is the ``paths`` of
one ``disk.cleanup`` action (or one action per item, for per-item approval).
"""

from __future__ import annotations

import shlex
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core import fmt
from bot.domain import validate
from bot.remediation.probes import plain
from bot.ssh.base import Command, SSHRunner, SSHTarget

SEP = "|"  # not in the path grammar, so it can join paths in one parameter
FIND_TESTS = ("-path '*/huggingface/hub/*' -o -path '*/torch/hub/*' -o -path '*/pip/*' "
              "-o -path '*/checkpoints/*' -o -name core -o -name 'core.[0-9]*' "
              "-o -path '*/coredump/*'")


@dataclass(frozen=True)
class FileSeen:
    path: str
    size: int
    mtime: float
    owner: str


@dataclass(frozen=True)
class CleanupCandidate:
    """One item of the preview: a file, or one checkpoint entry with all its files."""

    category: str  # hf_cache | torch_hub | pip_cache | checkpoint | core_dump
    label: str
    paths: tuple[str, ...]
    size: int
    mtime: float
    owner: str


def find_command(prefix: str) -> str:
    return (f"find {shlex.quote(prefix)} -xdev -type f \\( {FIND_TESTS} \\) "
            "-printf '%s\\t%T@\\t%u\\t%p\\0'")


def parse_find(text: str) -> tuple[list[FileSeen], int]:
    """NUL-separated ``size\\tmtime\\towner\\tpath`` records; unsafe names are counted, not kept."""
    out, unsafe = [], 0
    for record in text.split("\0"):
        parts = record.lstrip("\n").split("\t", 3)
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        size, mtime, owner, path = parts
        if not validate.is_valid(validate.abs_path, path):
            unsafe += 1
            continue
        try:
            out.append(FileSeen(path, int(size), float(mtime), owner[:32]))
        except ValueError:
            continue
    return out, unsafe


def category(path: str) -> str | None:
    if "/huggingface/hub/" in path:
        return "hf_cache"
    if "/torch/hub/" in path:
        return "torch_hub"
    if "/pip/" in path:
        return "pip_cache"
    if "/checkpoints/" in path:
        return "checkpoint"
    name = path.rsplit("/", 1)[-1]
    if "/coredump/" in path or name == "core" or name.startswith("core."):
        return "core_dump"
    return None


def under(path: str, dirs: Iterable[str]) -> bool:
    return any(path == d.rstrip("/") or path.startswith(d.rstrip("/") + "/") for d in dirs)


def _checkpoint_entry(path: str) -> tuple[str, str] | None:
    """``.../checkpoints/RUN/ENTRY[/...]`` → (run dir, entry path)."""
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
    return sorted(out, key=lambda c: (-c.size, c.label))


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
    cmds = [Command("lsof", f"lsof -t -- {shlex.quote(p)}", timeout_s) for p in paths]
    results = runner.run_many(plain(target), cmds) if cmds else []
    return {p for p, r in zip(paths, results, strict=True) if r.ok and r.stdout.strip()}


def find_files(runner: SSHRunner, target: SSHTarget, allowed: Sequence[str],
               timeout_s: float) -> tuple[list[FileSeen], int]:
    cmds = [Command("find", find_command(p), timeout_s) for p in allowed]
    files: list[FileSeen] = []
    unsafe = 0
    for probe in runner.run_many(plain(target), cmds):
        seen, bad = parse_find(probe.stdout)  # exit 1 for an unreadable subdir is normal
        files += seen
        unsafe += bad
    return files, unsafe


def candidates(runner: SSHRunner, target: SSHTarget, *, allowed: Sequence[str],
               protected: Sequence[str], keep_checkpoints: int = 2,
               timeout_s: float = 30.0) -> list[CleanupCandidate]:
    """The preview for the thread: read-only probes, then ``plan_candidates``."""
    files, _ = find_files(runner, target, allowed, timeout_s)
    busy = open_files(runner, target, [f.path for f in files], timeout_s)
    return plan_candidates(files, allowed=allowed, protected=protected, open_paths=busy,
                           keep_checkpoints=keep_checkpoints)


def unfinished_output_dirs(conn: Any, host: str) -> tuple[str, ...]:
    """Output directories of ``host``'s unfinished jobs (queued, running, paused,
    interrupted, failed): what a cleanup must never delete, for the flow and the CLI alike.
    ``conn`` is the bytes Redis client the extraction queue reads."""
    from bot.jobs.book import JobBook  # kept lazy like the flow's
    from storage.jobs import JobStore

    return JobBook(JobStore(conn)).unfinished_output_dirs(host)


def paths_param(chosen: Sequence[CleanupCandidate]) -> str:
    return SEP.join(p for c in chosen for p in c.paths)


def preview(chosen: Sequence[CleanupCandidate], now: float) -> list[str]:
    """One line per item for the thread: size, age, owner, what it is."""

    return [f"{fmt.size(c.size):>10}  {max(now - c.mtime, 0) / 86400:5.0f} d  {c.owner:<8} "
            f"{c.category:<10} {c.label}" for c in chosen]
