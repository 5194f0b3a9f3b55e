"""Submit and control extraction jobs: the API the CLI, Slack and remediation call.

A job (``ex-…``) is our record; each time it is queued it gets an RQ run
(``ex-…-r1``, ``-r2`` after a resume). RQ's ``Retry`` reruns the same run after a
crash; pause and cancel are cooperative (the job reads its control key between
batches), and a run still waiting in the queue is cancelled in RQ directly.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

from redis import ConnectionPool, Redis
from rq import Queue, Retry
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job
from rq.registry import StartedJobRegistry

from bot.core import strings
from bot.core.errors import UserError
from bot.extract.dataset import survey
from bot.extract.spec import JobSpec, parse_spec, spec_from_json
from bot.extract.states import FINAL, JobState, JobStatus, status_from_fields
from storage import job_records as records
from storage import keys

ENTRY_POINT = "bot.extract.job.run_extraction"
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


def stale_after(spec_json: str) -> float:
    """How long without a heartbeat before a started run counts as interrupted."""
    interval = spec_from_json(spec_json).progress_interval_s if spec_json else 2.0
    return max(5.0, 6 * interval)


def _enqueue_run(conn: Redis, job_id: str, spec: JobSpec, run: int) -> str:
    """By dotted name: the bot's process never imports torch just to queue a job."""
    rq_id = f"{job_id}-r{run}"
    queue = Queue(keys.queue_name(spec.host), connection=rq_conn(conn))
    queue.enqueue(
        ENTRY_POINT,
        job_id,
        job_id=rq_id,
        retry=Retry(max=spec.retries),
        job_timeout=-1,
        result_ttl=RESULT_TTL_S,
        failure_ttl=FAILURE_TTL_S,
        description=f"extract {spec.name} ({job_id})",
    )
    records.write(
        conn,
        job_id,
        rq_id=rq_id,
        runs=run,
        state=JobState.QUEUED.value,
        updated_at=f"{time.time():.3f}",
    )
    return rq_id


def submit(
    conn: Redis, spec: JobSpec, *, host: str | None = None, incident_id: str | None = None
) -> str:
    """Validate the dataset, record the job and queue its first run; return the job id."""
    if host is not None:
        spec = parse_spec({**spec.model_dump(), "host": host}, "--host")
    total, _ = survey(spec.dataset)
    job_id = f"ex-{uuid.uuid4().hex[:12]}"
    now = time.time()
    records.write(
        conn,
        job_id,
        id=job_id,
        name=spec.name,
        host=spec.host,
        spec=spec.to_json(),
        output_dir=str(spec.output_dir),
        state=JobState.QUEUED.value,
        total=total,
        done=0,
        created_at=f"{now:.3f}",
        updated_at=f"{now:.3f}",
        incident_id=incident_id or "",
    )
    conn.sadd(keys.jobs_by_host(spec.host), job_id)
    conn.zadd(keys.jobs_all(), {job_id: now})
    if incident_id:
        conn.set(keys.job_incident(job_id), incident_id)
    records.event(conn, job_id, "submitted", total=total, host=spec.host)
    _enqueue_run(conn, job_id, spec, 1)
    return job_id


def _rq_job(conn: Redis, rq_id: str) -> Job | None:
    if not rq_id:
        return None
    try:
        return Job.fetch(rq_id, connection=rq_conn(conn))
    except NoSuchJobError:
        return None


def _rq_error(job: Job) -> str | None:
    result = job.latest_result()
    text = getattr(result, "exc_string", None) or ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:500] if lines else None


def status(conn: Redis, job_id: str) -> JobStatus:
    fields = records.read(conn, job_id)
    if not fields:
        raise UserError(strings.EXTRACT_NO_SUCH_JOB.format(job=job_id), 2)
    job = _rq_job(conn, fields.get("rq_id", ""))
    rq_status = job.get_status(refresh=False) if job is not None else None
    if rq_status == "failed" and job is not None:
        fields["last_error"] = _rq_error(job) or fields.get("last_error", "")
    return status_from_fields(fields, rq_status, time.time(), stale_after(fields.get("spec", "")))


def list_jobs(conn: Redis, host: str | None = None) -> list[JobStatus]:
    """Newest first; one host's jobs when ``host`` is given."""
    ids: list[Any] = list(conn.zrevrange(keys.jobs_all(), 0, -1))  # type: ignore[arg-type]
    if host is not None:
        members = {records._text(m) for m in conn.smembers(keys.jobs_by_host(host))}  # type: ignore[union-attr]
        ids = [i for i in ids if records._text(i) in members]
    return [status(conn, records._text(i)) for i in ids if records.read(conn, records._text(i))]


def _cancel_run(conn: Redis, rq_id: str) -> None:
    """Take a run out of RQ's hands: out of the queue, and out of the started registry so
    RQ's cleanup does not retry a run we replaced."""
    job = _rq_job(conn, rq_id)
    if job is None:
        return
    registry = StartedJobRegistry(job.origin, connection=rq_conn(conn))
    # entries are "rq_id:execution_id"; the execution hash may already have expired
    members = [m for m in conn.zrange(registry.key, 0, -1)  # type: ignore[union-attr]
               if records._text(m).startswith(f"{rq_id}:")]
    if members:
        conn.zrem(registry.key, *members)
    conn.delete(job.execution_registry.key)  # dangling ids there make RQ's cancel() raise
    with contextlib.suppress(InvalidJobOperation):
        job.cancel()


def _request(conn: Redis, job_id: str, what: JobState, request: str) -> JobStatus:
    current = status(conn, job_id)
    if current.state in FINAL:
        raise UserError(strings.EXTRACT_CANNOT_CONTROL.format(job=job_id, state=current.state), 2)
    conn.set(keys.job_control(job_id), request)
    if current.state is not JobState.RUNNING:
        _cancel_run(conn, current.rq_id)
        records.write(conn, job_id, state=what.value, updated_at=f"{time.time():.3f}")
        records.event(conn, job_id, what.value)
    return status(conn, job_id)


def pause(conn: Redis, job_id: str) -> JobStatus:
    """A running job stops after its batch in flight; a queued one is taken off the queue."""
    return _request(conn, job_id, JobState.PAUSED, "pause")


def cancel(conn: Redis, job_id: str) -> JobStatus:
    return _request(conn, job_id, JobState.CANCELLED, "cancel")


def resume(conn: Redis, job_id: str) -> JobStatus:
    """Queue a new run of a paused, interrupted or failed job (idempotent when queued/running)."""
    current = status(conn, job_id)
    if records.control(conn, job_id) == "pause":
        conn.delete(keys.job_control(job_id))
    if current.state in (JobState.QUEUED, JobState.RUNNING):
        return status(conn, job_id)
    if current.state in FINAL:
        raise UserError(strings.EXTRACT_CANNOT_RESUME.format(job=job_id, state=current.state), 2)
    _cancel_run(conn, current.rq_id)
    fields = records.read(conn, job_id)
    run = current.runs + 1
    rq_id = _enqueue_run(conn, job_id, spec_from_json(fields["spec"]), run)
    records.event(conn, job_id, "requeued", run=run, rq_id=rq_id)
    return status(conn, job_id)
