"""The output directory: atomic per-sample files, and the scan that repairs a crashed run.

A finished sample is a file that exists: each one is written to a temporary name,
fsynced, then renamed. A crash can leave temporary files (removed on the next scan) and,
on file systems or older writers that lie, a corrupt final file; so the scan loads and
shape-checks the files written in the last moments before the previous run ended, and
only those (``os.scandir`` plus one ``stat`` each for the rest).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bot.core.durable import fsync_dir

SUFFIX = ".pt"
TMP_SUFFIX = ".tmp"
VERIFY_CAP = 4096
Payload = dict[str, Any]
SaveFn = Callable[[Payload, Path, bool], int]


def sample_path(out: Path, sample_id: str) -> Path:
    return out / f"{sample_id}{SUFFIX}"


def payload(
    sample_id: str, tokens: tuple[int, ...], states: torch.Tensor, layers: tuple[int, ...]
) -> Payload:
    """What one ``.pt`` holds; ``hidden_states`` is (len(layers), len(tokens), hidden)."""
    return {
        "id": sample_id,
        "input_ids": torch.tensor(tokens, dtype=torch.long),
        "hidden_states": states,
        "layers": list(layers),
    }


def save_atomic(obj: Payload, final: Path, fsync: bool = True) -> int:
    """Serialise in memory, write a temp file, fsync, rename; return bytes written.

    Serialising first means a full disk surfaces as ``OSError(ENOSPC)`` from ``write``
    (torch's own zip writer would turn it into a RuntimeError).
    """
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getbuffer()
    tmp = final.with_name(f".{final.name}.{os.getpid()}-{threading.get_ident()}{TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return len(data)


@dataclass(frozen=True)
class Expect:
    n_layers: int
    hidden: int
    dtype: torch.dtype


def verify_file(path: Path, expect: Expect) -> str | None:
    """None when the file is a complete sample; otherwise why not."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        return f"does not load: {type(exc).__name__}"
    if not isinstance(obj, dict) or obj.get("id") != path.name[: -len(SUFFIX)]:
        return "wrong content or id"
    ids, states = obj.get("input_ids"), obj.get("hidden_states")
    if not isinstance(ids, torch.Tensor) or not isinstance(states, torch.Tensor) or ids.dim() != 1:
        return "missing tensors"
    want = (expect.n_layers, ids.shape[0], expect.hidden)
    if tuple(states.shape) != want or states.dtype != expect.dtype:
        return f"shape {tuple(states.shape)} {states.dtype}, expected {want} {expect.dtype}"
    return None


@dataclass
class ScanReport:
    done: set[str] = field(default_factory=set)
    partial_removed: int = 0
    corrupt_removed: list[str] = field(default_factory=list)
    verified: int = 0
    files: int = 0
    seconds: float = 0.0


def _entries(out: Path, report: ScanReport) -> list[tuple[float, int, str]]:
    """(mtime, size, id) for every finished file; temporary leftovers are deleted."""
    found: list[tuple[float, int, str]] = []
    with os.scandir(out) as it:
        for entry in it:
            if entry.name.startswith(".") and entry.name.endswith(TMP_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                report.partial_removed += 1
            elif entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                found.append((st.st_mtime, st.st_size, entry.name[: -len(SUFFIX)]))
    return found


def _suspects(found: list[tuple[float, int, str]], window_s: float, last_n: int) -> set[str]:
    """Empty files, plus the newest ``last_n`` and those within ``window_s`` of the newest
    (at most ``VERIFY_CAP`` of them: a fast job writes thousands of files in a window)."""
    suspects = {sid for _, size, sid in found if size == 0}
    if found:
        ordered = sorted(found, reverse=True)
        newest = ordered[0][0]
        in_window = sum(1 for mtime, _, _ in ordered[:VERIFY_CAP] if mtime >= newest - window_s)
        suspects.update(sid for _, _, sid in ordered[: max(last_n, in_window)])
    return suspects


def scan(out: Path, expect: Expect, window_s: float = 30.0, last_n: int = 256) -> ScanReport:
    """Find finished samples, delete temp leftovers, verify and delete corrupt recent files."""
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    report = ScanReport()
    found = _entries(out, report)
    report.files = len(found)
    suspects = _suspects(found, window_s, last_n)
    for sid in sorted(suspects):
        report.verified += 1
        if verify_file(sample_path(out, sid), expect) is not None:
            with contextlib.suppress(FileNotFoundError):
                sample_path(out, sid).unlink()
            report.corrupt_removed.append(sid)
    report.done = {sid for _, _, sid in found} - set(report.corrupt_removed)
    if report.partial_removed or report.corrupt_removed:
        fsync_dir(out)
    report.seconds = time.perf_counter() - t0
    return report
