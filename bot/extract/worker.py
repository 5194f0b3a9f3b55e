"""The extraction worker process, before it forks work horses: pin malloc, name the
worker's pid for the horses' parent-death guard, set the disk-full alert URL.

The RQ side (the forking worker, its tuning, how a dead worker's run comes back, the
entry point that hands a horse its ``RunRecord``) is ``storage/rq_worker.py`` and
``storage/jobs.py``; ``incident-bot worker`` (``bot/commands/worker.py``) joins the two.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os

from bot.extract import alerts
from bot.extract.guard import WORKER_PID_ENV

M_MMAP_THRESHOLD = -3


def fixed_mmap_threshold(nbytes: int = 128 * 1024) -> bool:
    """Pin glibc's mmap threshold so big per-sample buffers go back to the OS on free.

    glibc raises the threshold after each large free, after which those buffers come from
    fragmented per-thread heaps and a long run's RSS creeps up with the work done. Pinned,
    the horse's peak no longer depends on the dataset's size (bench/extract.py (e)).
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, nbytes))
    return False


def prepare_horses(alerts_url: str | None = None) -> None:
    """Set up this process so the work horses it forks inherit it: this process's pid
    (their parent-death guard checks it), the pinned mmap threshold and the alert URL.
    The caller imports ``bot.extract.job`` first, so torch is loaded once, not per horse."""
    os.environ[WORKER_PID_ENV] = str(os.getpid())
    fixed_mmap_threshold()
    alerts.configure(alerts_url)
