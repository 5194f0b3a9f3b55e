"""Extraction jobs in Redis and RQ: the queue, the runs, the job index and job links.

A job (``ex-…``) is our record (``storage/job_records.py``); each time it is queued it
gets an RQ run (``ex-…-r1``, ``-r2`` after a resume). What a job *means* (its spec, its
states) lives in ``bot/extract``; this module only moves it in and out of Redis and RQ.
"""

from __future__ import annotations

import contextlib
from typing import Any

from redis import ConnectionPool, Redis
from rq import Queue, Retry, get_current_job
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job
from rq.registry import StartedJobRegistry

from storage import job_records as records
from storage import keys

ENTRY_POINT = "bot.extract.job.run_extraction"  # by dotted name: queuing never imports torch
RESULT_TTL_S = 7 * 86400
FAILURE_TTL_S = 30 * 86400


def rq_conn(conn: Redis) -> Redis:
    """RQ needs raw bytes; a decoded client gets one bytes twin on the same server (cached
    on the client, so listing many jobs does not open a pool per job)."""
    kwargs = dict(conn.connection_pool.connection_kwargs)
    if not kwargs.get("decode_responses"):
        return conn
    twin: Redis | None = getattr(conn, "_ib_rq_twin", None)
    if twin is None:
        kwargs["decode_responses"] = False
        pool = ConnectionPool(connection_class=conn.connection_pool.connection_class, **kwargs)
        twin = Redis(connection_pool=pool)
        conn._ib_rq_twin = twin  # type: ignore[attr-defined]
    return twin


def index(conn: Redis, job_id: str, host: str, created_at: float) -> None:
    """Make a new job findable: by host and in the newest-first list."""
    conn.sadd(keys.jobs_by_host(host), job_id)
    conn.zadd(keys.jobs_all(), {job_id: created_at})


def job_ids(conn: Redis, host: str | None = None) -> list[str]:
    """Newest first; one host's jobs when ``host`` is given; only jobs with a record."""
    ids = [records.text(i) for i in conn.zrevrange(keys.jobs_all(), 0, -1)]  # type: ignore[union-attr]
    if host is not None:
        members = {records.text(m) for m in conn.smembers(keys.jobs_by_host(host))}  # type: ignore[union-attr]
        ids = [i for i in ids if i in members]
    return [i for i in ids if conn.exists(keys.job_record(i))]


def enqueue_run(conn: Redis, job_id: str, *, host: str, run: int, retries: int,
                description: str) -> str:
    """Queue run ``run`` of ``job_id`` on ``host``'s queue; return its RQ id."""
    rq_id = f"{job_id}-r{run}"
    queue = Queue(keys.queue_name(host), connection=rq_conn(conn))
    queue.enqueue(ENTRY_POINT, job_id, job_id=rq_id, retry=Retry(max=retries), job_timeout=-1,
                  result_ttl=RESULT_TTL_S, failure_ttl=FAILURE_TTL_S, description=description)
    return rq_id


def _rq_job(conn: Redis, rq_id: str) -> Job | None:
    if not rq_id:
        return None
    try:
        return Job.fetch(rq_id, connection=rq_conn(conn))
    except NoSuchJobError:
        return None


def run_state(conn: Redis, rq_id: str) -> tuple[str | None, str | None]:
    """RQ's status of a run (None when RQ no longer has it) and, if it failed, the last
    line of its traceback."""
    job = _rq_job(conn, rq_id)
    if job is None:
        return None, None
    status = job.get_status(refresh=False)
    if status != "failed":
        return status, None
    text = getattr(job.latest_result(), "exc_string", None) or ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return status, (lines[-1][:500] if lines else None)


def cancel_run(conn: Redis, rq_id: str) -> None:
    """Take a run out of RQ's hands: out of the queue, and out of the started registry so
    RQ's cleanup does not retry a run we replaced."""
    job = _rq_job(conn, rq_id)
    if job is None:
        return
    registry = StartedJobRegistry(job.origin, connection=rq_conn(conn))
    # entries are "rq_id:execution_id"; the execution hash may already have expired
    members = [m for m in conn.zrange(registry.key, 0, -1)  # type: ignore[union-attr]
               if records.text(m).startswith(f"{rq_id}:")]
    if members:
        conn.zrem(registry.key, *members)
    conn.delete(job.execution_registry.key)  # dangling ids there make RQ's cancel() raise
    with contextlib.suppress(InvalidJobOperation):
        job.cancel()


def queue_depth(conn: Redis, host: str) -> int:
    return int(Queue(keys.queue_name(host), connection=rq_conn(conn)).count)


def current_run() -> Any:
    """The RQ job this work horse is running (None outside a worker)."""
    return get_current_job()


class JobLinks:
    """Which incident a job works for: written here and nowhere else."""

    def __init__(self, conn: Redis) -> None:
        self.conn = conn

    def link(self, job_id: str, incident_id: str) -> None:
        """Both the lookup key and the record's field, so either side finds the other."""
        self.conn.set(keys.job_incident(job_id), incident_id)
        records.write(self.conn, job_id, incident_id=incident_id)

    def incident_of(self, job_id: str) -> str | None:
        value = self.conn.get(keys.job_incident(job_id))
        return None if value is None else records.text(value)
