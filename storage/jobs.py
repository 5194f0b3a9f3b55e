"""Extraction jobs in Redis and RQ: the queue, the runs, the job index and job links.

A job (``ex-…``) is our record (``storage/job_records.py``); each time it is queued it
gets an RQ run (``ex-…-r1``, ``-r2`` after a resume). What a job *means* (its spec, its
states) lives in ``bot/jobs`` (the bot's side) and ``bot/extract`` (the run itself); this
module only moves it in and out of Redis and RQ. Two handles: ``JobStore``, what the bot
reads and queues, and ``JobRun``, what one run reads and writes (the worker side's
``RunRecord``), handed to the run body by RQ's entry point ``run_extraction``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from redis import ConnectionPool, Redis
from rq import Queue, Retry, get_current_job
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job
from rq.registry import StartedJobRegistry

from storage import job_records as records
from storage import keys
from storage.leases import Lease, job_lease

ENTRY_POINT = "storage.jobs.run_extraction"  # by dotted name: queuing never imports torch
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


class JobStore:
    """What the bot reads, queues and links about extraction jobs (``bot/jobs`` takes
    this, never the client). Works with a decoded or a bytes client: RQ gets its bytes
    twin (``rq_conn``)."""

    def __init__(self, conn: Redis) -> None:
        self.conn = conn
        self.rq = rq_conn(conn)
        self.links = JobLinks(conn)

    def read(self, job_id: str) -> records.Fields:
        return records.read(self.conn, job_id)

    def write(self, job_id: str, **fields: object) -> None:
        records.write(self.conn, job_id, **fields)

    def event(self, job_id: str, kind: str, **fields: object) -> None:
        records.event(self.conn, job_id, kind, **fields)

    def events_since(self, job_id: str, since_id: str = "0-0") -> list[dict[str, str]]:
        return records.events_since(self.conn, job_id, since_id)

    def control(self, job_id: str) -> str | None:
        return records.control(self.conn, job_id)

    def request(self, job_id: str, what: str) -> None:
        records.request(self.conn, job_id, what)

    def clear_request(self, job_id: str) -> None:
        records.clear_request(self.conn, job_id)

    def link(self, job_id: str, incident_id: str) -> None:
        self.links.link(job_id, incident_id)

    def index(self, job_id: str, host: str, created_at: float) -> None:
        """Make a new job findable: by host and in the newest-first list."""
        self.conn.sadd(keys.jobs_by_host(host), job_id)
        self.conn.zadd(keys.jobs_all(), {job_id: created_at})

    def job_ids(self, host: str | None = None) -> list[str]:
        """Newest first; one host's jobs when ``host`` is given; only jobs with a record."""
        ids = [records.text(i) for i in self.conn.zrevrange(keys.jobs_all(), 0, -1)]  # type: ignore[union-attr]
        if host is not None:
            members = {records.text(m) for m in self.conn.smembers(keys.jobs_by_host(host))}  # type: ignore[union-attr]
            ids = [i for i in ids if i in members]
        return [i for i in ids if self.conn.exists(keys.job_record(i))]

    def enqueue_run(self, job_id: str, *, host: str, run: int, retries: int,
                    description: str) -> str:
        """Queue run ``run`` of ``job_id`` on ``host``'s queue; return its RQ id."""
        rq_id = f"{job_id}-r{run}"
        queue = Queue(keys.queue_name(host), connection=self.rq)
        queue.enqueue(ENTRY_POINT, job_id, job_id=rq_id, retry=Retry(max=retries), job_timeout=-1,
                      result_ttl=RESULT_TTL_S, failure_ttl=FAILURE_TTL_S, description=description)
        return rq_id

    def _rq_job(self, rq_id: str) -> Job | None:
        if not rq_id:
            return None
        try:
            return Job.fetch(rq_id, connection=self.rq)
        except NoSuchJobError:
            return None

    def run_state(self, rq_id: str) -> tuple[str | None, str | None]:
        """RQ's status of a run (None when RQ no longer has it) and, if it failed, the last
        line of its traceback."""
        job = self._rq_job(rq_id)
        if job is None:
            return None, None
        status = job.get_status(refresh=False)
        if status != "failed":
            return status, None
        text = getattr(job.latest_result(), "exc_string", None) or ""
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return status, (lines[-1][:500] if lines else None)

    def cancel_run(self, rq_id: str) -> None:
        """Take a run out of RQ's hands: out of the queue, and out of the started registry so
        RQ's cleanup does not retry a run we replaced."""
        job = self._rq_job(rq_id)
        if job is None:
            return
        registry = StartedJobRegistry(job.origin, connection=self.rq)
        # entries are "rq_id:execution_id"; the execution hash may already have expired
        members = [m for m in self.conn.zrange(registry.key, 0, -1)  # type: ignore[union-attr]
                   if records.text(m).startswith(f"{rq_id}:")]
        if members:
            self.conn.zrem(registry.key, *members)
        self.conn.delete(job.execution_registry.key)  # dangling ids there make RQ's cancel() raise
        with contextlib.suppress(InvalidJobOperation):
            job.cancel()

    def queue_depth(self, host: str) -> int:
        return int(Queue(keys.queue_name(host), connection=self.rq).count)


class JobRun:
    """One run's handle on its job: the worker side's ``RunRecord``
    (``bot/extract/record.py``) over Redis, with the run's RQ job for its id and meta."""

    def __init__(self, conn: Redis, job_id: str, rq_job: Job | None = None) -> None:
        self.conn, self._job_id, self.rq_job = conn, job_id, rq_job

    @property
    def job_id(self) -> str:
        return self._job_id

    @property
    def run_id(self) -> str | None:
        return None if self.rq_job is None else str(self.rq_job.id)

    def read(self) -> records.Fields:
        return records.read(self.conn, self.job_id)

    def write(self, **fields: object) -> None:
        records.write(self.conn, self.job_id, **fields)

    def event(self, kind: str, **fields: object) -> None:
        records.event(self.conn, self.job_id, kind, **fields)

    def add(self, **counts: int) -> None:
        records.add(self.conn, self.job_id, **counts)

    def mark_started(self, now: str) -> None:
        records.mark_started(self.conn, self.job_id, now)

    def control(self) -> str | None:
        return records.control(self.conn, self.job_id)

    def clear_request(self) -> None:
        records.clear_request(self.conn, self.job_id)

    def failures(self, max_tries: int) -> records.FailureBook:
        return records.FailureBook(self.conn, self.job_id, max_tries)

    def lease(self, ttl_s: float) -> Lease:
        return job_lease(self.conn, self.job_id, ttl_s)

    def save_meta(self, snapshot: dict[str, Any]) -> None:
        if self.rq_job is not None:
            self.rq_job.meta.update(snapshot)
            self.rq_job.save_meta()


RunBody = Callable[[JobRun], str]
_body: list[RunBody] = []  # set once per worker process, before it forks its horses


def serve_runs(body: RunBody) -> None:
    """Name the run body this process's work horses call (``bot.extract.job.run``, set
    by ``incident-bot worker``): storage never imports the torch side, it is handed it."""
    _body[:] = [body]


def run_extraction(job_id: str) -> str:
    """RQ's entry point, in the work horse: the run's record over the run's own
    connection, handed to the body the worker named."""
    rq_job = get_current_job()
    if rq_job is None or not _body:
        raise RuntimeError("run_extraction runs in a worker started by `incident-bot worker`")
    return _body[0](JobRun(rq_job.connection, job_id, rq_job))
