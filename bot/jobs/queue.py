"""Submit and control extraction jobs: the API the CLI, Slack and remediation call.

A job (``ex-…``) is our record; each time it is queued it gets an RQ run
(``ex-…-r1``, ``-r2`` after a resume). RQ's ``Retry`` reruns the same run after a
crash; pause and cancel are cooperative (the job reads its control key between
batches), and a run still waiting in the queue is cancelled in RQ directly. Every Redis
and RQ call is behind ``storage/jobs.py`` ``JobStore``; this module decides. It reads
the spec and surveys the dataset (``bot/extract/spec.py``, ``dataset.py``: torch-free)
and never loads torch: the run itself is queued by name.
"""

from __future__ import annotations

import time

from bot.core import strings
from bot.core.errors import UserError
from bot.domain.validate import new_job_id
from bot.extract.dataset import survey
from bot.extract.spec import ExtractionSpec, parse_spec, spec_from_json
from bot.jobs.states import FINAL, JobState, JobStatus, status_from_fields
from storage.jobs import JobStore


def stale_after(spec_json: str) -> float:
    """How long without a heartbeat before a started run counts as interrupted."""
    interval = spec_from_json(spec_json).progress_interval_s if spec_json else 2.0
    return max(5.0, 6 * interval)


def _enqueue_run(store: JobStore, job_id: str, spec: ExtractionSpec, run: int) -> str:
    rq_id = store.enqueue_run(job_id, host=spec.host, run=run, retries=spec.retries,
                             description=f"extract {spec.name} ({job_id})")
    store.write(job_id, rq_id=rq_id, runs=run, state=JobState.QUEUED.value,
                  updated_at=f"{time.time():.3f}")
    return rq_id


def submit(
    store: JobStore, spec: ExtractionSpec, *, host: str | None = None,
    incident_id: str | None = None,
) -> str:
    """Validate the dataset, record the job and queue its first run; return the job id."""
    if host is not None:
        spec = parse_spec({**spec.model_dump(), "host": host}, "--host")
    total, _ = survey(spec.dataset)
    job_id = new_job_id()
    now = time.time()
    store.write(
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
    store.index(job_id, spec.host, now)
    if incident_id:
        store.link(job_id, incident_id)
    store.event(job_id, "submitted", total=total, host=spec.host)
    _enqueue_run(store, job_id, spec, 1)
    return job_id


def status(store: JobStore, job_id: str) -> JobStatus:
    fields = store.read(job_id)
    if not fields:
        raise UserError(strings.EXTRACT_NO_SUCH_JOB.format(job=job_id), 2)
    rq_status, error = store.run_state(fields.get("rq_id", ""))
    if rq_status == "failed":
        fields["last_error"] = error or fields.get("last_error", "")
    return status_from_fields(fields, rq_status, time.time(), stale_after(fields.get("spec", "")))


def list_jobs(store: JobStore, host: str | None = None) -> list[JobStatus]:
    """Newest first; one host's jobs when ``host`` is given."""
    return [status(store, job_id) for job_id in store.job_ids(host)]


def _request(store: JobStore, job_id: str, what: JobState, request: str) -> JobStatus:
    current = status(store, job_id)
    if current.state in FINAL:
        raise UserError(strings.EXTRACT_CANNOT_CONTROL.format(job=job_id, state=current.state), 2)
    store.request(job_id, request)
    if current.state is not JobState.RUNNING:
        store.cancel_run(current.rq_id)
        store.write(job_id, state=what.value, updated_at=f"{time.time():.3f}")
        store.event(job_id, what.value)
    return status(store, job_id)


def pause(store: JobStore, job_id: str) -> JobStatus:
    """A running job stops after its batch in flight; a queued one is taken off the queue."""
    return _request(store, job_id, JobState.PAUSED, "pause")


def cancel(store: JobStore, job_id: str) -> JobStatus:
    return _request(store, job_id, JobState.CANCELLED, "cancel")


def resume(store: JobStore, job_id: str) -> JobStatus:
    """Queue a new run of a paused, interrupted or failed job (idempotent when queued/running)."""
    current = status(store, job_id)
    if store.control(job_id) == "pause":
        store.clear_request(job_id)
    if current.state in (JobState.QUEUED, JobState.RUNNING):
        return status(store, job_id)
    if current.state in FINAL:
        raise UserError(strings.EXTRACT_CANNOT_RESUME.format(job=job_id, state=current.state), 2)
    store.cancel_run(current.rq_id)
    fields = store.read(job_id)
    run = current.runs + 1
    rq_id = _enqueue_run(store, job_id, spec_from_json(fields["spec"]), run)
    store.event(job_id, "requeued", run=run, rq_id=rq_id)
    return status(store, job_id)
