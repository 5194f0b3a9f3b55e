"""Crash-safe file writes shared by the agent's outbox and the extraction store.

A write is durable only once the file is fsynced *and* its rename is: a rename lives in
the directory, so the directory is fsynced too.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make renames in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, text: str) -> None:
    """Write-then-rename with fsync: a crash leaves the old file or the new, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
