"""The extraction worker process: preload the job module, pin malloc, then work.

The RQ side (the forking worker, its tuning, how a dead worker's run comes back) is
``storage/rq_worker.py``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from typing import Any

from bot.extract import alerts
from bot.extract.guard import WORKER_PID_ENV
from storage.connection import Redis
from storage.rq_worker import DEFAULT_TUNING, FAST, WorkerTuning, make_worker

__all__ = ["FAST", "WorkerTuning", "fixed_mmap_threshold", "run_worker"]


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


def run_worker(
    conn: Redis,
    host: str,
    tuning: WorkerTuning = DEFAULT_TUNING,
    *,
    burst: bool = False,
    name: str | None = None,
    alerts_url: str | None = None,
    logging_level: str = "WARNING",
    max_jobs: int | None = None,
) -> bool:
    """Work until stopped. Horses inherit the preloaded job module (torch imported once),
    the alert URL and this process's pid, which their parent-death guard checks."""
    import bot.extract.job  # noqa: F401 - preload before fork

    os.environ[WORKER_PID_ENV] = str(os.getpid())
    fixed_mmap_threshold()  # inherited by every forked work horse
    alerts.configure(alerts_url)
    worker = make_worker(conn, host, tuning, name)
    kwargs: dict[str, Any] = {"burst": burst, "logging_level": logging_level, "max_jobs": max_jobs}
    return bool(worker.work(**kwargs))
