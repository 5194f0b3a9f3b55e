"""The extraction's RQ worker: a forking ``Worker`` on one host's queue, tuned for fast
recovery (``incident-bot worker`` runs it, after ``bot/extract/worker.py`` readied the
process its horses fork from, with ``bot.extract.job.run`` as the run body).

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

from dataclasses import dataclass
from typing import Any

from redis import Redis
from rq import Queue, Worker
from rq.job import Job

from storage import keys
from storage.connection import connect
from storage.jobs import ENTRY_POINT, RunBody, serve_runs

# where RQ's entry point lived before the jobs API left bot/extract: a run queued (or
# retried) by an older bot still names it, and runs through the current one
OLD_ENTRY_POINTS = frozenset({"bot.extract.job.run_extraction"})


@dataclass(frozen=True)
class WorkerTuning:
    """Production defaults: a killed worker's run is queued again within ~35 s."""

    job_monitoring_interval: int = 5
    maintenance_interval: int = 10
    abandoned_grace_s: int = 15
    worker_ttl: int = 30  # an idle worker wakes every worker_ttl - 15 s to run maintenance


DEFAULT_TUNING = WorkerTuning()
FAST = WorkerTuning(
    job_monitoring_interval=1, maintenance_interval=1, abandoned_grace_s=2, worker_ttl=16
)


class ExtractWorker(Worker):
    """RQ's forking worker with a short abandoned-run grace instead of RQ's 60 s."""

    abandoned_grace_s: int = 15

    def get_heartbeat_ttl(self, job: Job) -> int:
        return int(self.job_monitoring_interval + self.abandoned_grace_s)

    def perform_job(self, job: Job, queue: Queue) -> bool:
        """Run the job; one queued under an old entry point goes to the current one."""
        if job.func_name in OLD_ENTRY_POINTS:
            job.func_name = ENTRY_POINT
        return bool(super().perform_job(job, queue))


def make_worker(
    conn: Redis, host: str, tuning: WorkerTuning = DEFAULT_TUNING, name: str | None = None
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


def run_worker(
    url: str,
    host: str,
    tuning: WorkerTuning = DEFAULT_TUNING,
    *,
    run: RunBody,
    burst: bool = False,
    name: str | None = None,
    logging_level: str = "WARNING",
    max_jobs: int | None = None,
) -> bool:
    """Work until stopped; every run RQ hands a horse goes to ``run`` with its record.

    The worker opens its own connection to ``url`` (RQ's bytes client) and checks it
    first: an unreachable Redis is a ``StorageError`` before any horse forks."""
    conn = connect(url, decode=False)
    conn.ping()
    serve_runs(run)
    worker = make_worker(conn, host, tuning, name)
    kwargs: dict[str, Any] = {"burst": burst, "logging_level": logging_level, "max_jobs": max_jobs}
    return bool(worker.work(**kwargs))
