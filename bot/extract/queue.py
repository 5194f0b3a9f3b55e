"""Submit and control extraction jobs: the API the CLI, Slack and remediation call.

A job (``ex-…``) is our record; each time it is queued it gets an RQ run
(``ex-…-r1``, ``-r2`` after a resume). RQ's ``Retry`` reruns the same run after a
crash; pause and cancel are cooperative (the job reads its control key between
batches), and a run still waiting in the queue is cancelled in RQ directly. Every Redis
and RQ call is in ``storage/jobs.py`` and ``storage/job_records.py``; this module decides.
"""

from __future__ import annotations

import time

from bot.core import strings
from bot.core.errors import UserError
from bot.domain.validate import new_job_id
from bot.extract.dataset import survey
from bot.extract.spec import ExtractionSpec, parse_spec, spec_from_json
from bot.extract.states import FINAL, JobState, JobStatus, status_from_fields
from storage import job_records as records
from storage import jobs
from storage.connection import Redis


def stale_after(spec_json: str) -> float:
    """How long without a heartbeat before a started run counts as interrupted."""
    interval = spec_from_json(spec_json).progress_interval_s if spec_json else 2.0
    return max(5.0, 6 * interval)


def _enqueue_run(conn: Redis, job_id: str, spec: ExtractionSpec, run: int) -> str:
    rq_id = jobs.enqueue_run(conn, job_id, host=spec.host, run=run, retries=spec.retries,
                             description=f"extract {spec.name} ({job_id})")
    records.write(conn, job_id, rq_id=rq_id, runs=run, state=JobState.QUEUED.value,
                  updated_at=f"{time.time():.3f}")
    return rq_id


def submit(
    conn: Redis, spec: ExtractionSpec, *, host: str | None = None, incident_id: str | None = None
) -> str:
    """Validate the dataset, record the job and queue its first run; return the job id."""
    if host is not None:
        spec = parse_spec({**spec.model_dump(), "host": host}, "--host")
    total, _ = survey(spec.dataset)
    job_id = new_job_id()
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
        incident_id="",
    )
    jobs.index(conn, job_id, spec.host, now)
    if incident_id:
        jobs.JobLinks(conn).link(job_id, incident_id)
    records.event(conn, job_id, "submitted", total=total, host=spec.host)
    _enqueue_run(conn, job_id, spec, 1)
    return job_id


def status(conn: Redis, job_id: str) -> JobStatus:
    fields = records.read(conn, job_id)
    if not fields:
        raise UserError(strings.EXTRACT_NO_SUCH_JOB.format(job=job_id), 2)
    rq_status, error = jobs.run_state(conn, fields.get("rq_id", ""))
    if rq_status == "failed":
        fields["last_error"] = error or fields.get("last_error", "")
    return status_from_fields(fields, rq_status, time.time(), stale_after(fields.get("spec", "")))


def list_jobs(conn: Redis, host: str | None = None) -> list[JobStatus]:
    """Newest first; one host's jobs when ``host`` is given."""
    return [status(conn, job_id) for job_id in jobs.job_ids(conn, host)]


def _request(conn: Redis, job_id: str, what: JobState, request: str) -> JobStatus:
    current = status(conn, job_id)
    if current.state in FINAL:
        raise UserError(strings.EXTRACT_CANNOT_CONTROL.format(job=job_id, state=current.state), 2)
    records.request(conn, job_id, request)
    if current.state is not JobState.RUNNING:
        jobs.cancel_run(conn, current.rq_id)
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
        records.clear_request(conn, job_id)
    if current.state in (JobState.QUEUED, JobState.RUNNING):
        return status(conn, job_id)
    if current.state in FINAL:
        raise UserError(strings.EXTRACT_CANNOT_RESUME.format(job=job_id, state=current.state), 2)
    jobs.cancel_run(conn, current.rq_id)
    fields = records.read(conn, job_id)
    run = current.runs + 1
    rq_id = _enqueue_run(conn, job_id, spec_from_json(fields["spec"]), run)
    records.event(conn, job_id, "requeued", run=run, rq_id=rq_id)
    return status(conn, job_id)
