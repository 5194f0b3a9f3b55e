"""The extraction worker: an RQ forking ``Worker`` on one host's queue, tuned for fast
recovery.

How a dead worker's job comes back (RQ 2.x): while a work horse runs, its worker
refreshes the run's entry in the queue's ``StartedJobRegistry`` every
``job_monitoring_interval`` seconds with a TTL of ``get_heartbeat_ttl`` (RQ's default:
interval + 60 s). When the worker is SIGKILLed the entry stops being refreshed; once it
expires, the next registry cleanup by any idle worker on that queue (every
``maintenance_interval``, checked each time its blocking dequeue times out, i.e. every
``worker_ttl - 15`` s) treats the run as abandoned and, while ``Retry`` has tries left,
puts it back on the queue. We shorten the grace (interval + ``abandoned_grace_s``) so the
whole path takes well under a minute with the defaults below. A killed work horse is
seen at once by its worker, which hands the run to ``Retry`` immediately.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from typing import Any

from redis import Redis
from rq import Queue, Worker
from rq.job import Job

from bot.extract import alerts
from bot.extract.guard import WORKER_PID_ENV
from storage import keys


@dataclass(frozen=True)
class WorkerTuning:
    """Production defaults: a killed worker's run is queued again within ~35 s."""

    job_monitoring_interval: int = 5
    maintenance_interval: int = 10
    abandoned_grace_s: int = 15
    worker_ttl: int = 30  # an idle worker wakes every worker_ttl - 15 s to run maintenance

    @property
    def worst_case_requeue_s(self) -> int:
        wake = max(1, self.worker_ttl - 15)
        return (
            self.job_monitoring_interval
            + self.abandoned_grace_s
            + max(wake, self.maintenance_interval)
        )


FAST = WorkerTuning(
    job_monitoring_interval=1, maintenance_interval=1, abandoned_grace_s=2, worker_ttl=16
)


class ExtractWorker(Worker):
    """RQ's forking worker with a short abandoned-run grace instead of RQ's 60 s."""

    abandoned_grace_s: int = 15

    def get_heartbeat_ttl(self, job: Job) -> int:
        return int(self.job_monitoring_interval + self.abandoned_grace_s)


def make_worker(
    conn: Redis, host: str, tuning: WorkerTuning = WorkerTuning(), name: str | None = None
) -> ExtractWorker:
    """A worker on ``host``'s queue; ``conn`` must be a bytes client (RQ pickles)."""
    queue = Queue(keys.queue_name(host), connection=conn)
    worker = ExtractWorker(
        [queue],
        connection=conn,
        name=name,
        job_monitoring_interval=tuning.job_monitoring_interval,
        maintenance_interval=tuning.maintenance_interval,
        worker_ttl=tuning.worker_ttl,
    )
    worker.abandoned_grace_s = tuning.abandoned_grace_s
    return worker


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
    tuning: WorkerTuning = WorkerTuning(),
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
