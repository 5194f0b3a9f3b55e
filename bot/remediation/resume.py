"""``extraction.resume``: the one catalog action that acts on the bot's queue, not a host.

It calls the extraction package's ``resume_job(redis, job_id)``; the job itself
skips finished samples and repairs half-written ones. ``bot.remediation.followup``
offers it (or chains it, per ``chain_resume``) after GPUs were freed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.core import strings
from bot.core.errors import UserError
from bot.domain.action_result import Outcome
from bot.remediation.options import RemediationOptions

ResumeFn = Callable[[Any, str], Any]
StatusFn = Callable[[Any, str], Any]


def extraction_calls(options: RemediationOptions) -> tuple[StatusFn, ResumeFn]:
    """The extraction queue's ``status`` and ``resume_job``: injected through the options
    (``job_status``, ``resume_job``), else the extraction package's own functions.

    The one place remediation reaches the extraction code: when that code moves
    (storage/), only these two imports change.
    """
    if options.job_status is not None and options.resume_job is not None:
        return options.job_status, options.resume_job
    from bot.jobs.queue import status
    from bot.jobs.status import resume_job
    from storage.jobs import JobStore

    return (options.job_status or (lambda conn, job: status(JobStore(conn), job)),
            options.resume_job or (lambda conn, job: resume_job(JobStore(conn), job)))


def preflight(options: RemediationOptions) -> ResumeFn:
    """Fail before anything is audited as started: no Redis for the bot's queue."""
    if options.redis is None:
        raise UserError(strings.REM_RESUME_NO_REDIS, 2)
    return extraction_calls(options)[1]


def _state(status: Any) -> str:
    state = getattr(status, "state", "?")
    return str(getattr(state, "value", state))


def resume_extraction(options: RemediationOptions, job: str) -> tuple[Outcome, str]:
    """Queue the job again; a job already queued or running is a no-op that says so."""
    preflight(options)
    job_status, resume_job = extraction_calls(options)
    try:
        before = job_status(options.redis, job)
        if _state(before) in ("queued", "running"):
            return Outcome.NOOP, strings.REM_RESUME_NOOP.format(job=job, state=_state(before))
        after = resume_job(options.redis, job)
    except UserError as exc:  # unknown job, finished job: the extraction package says why
        return Outcome.FAILED, exc.message
    return Outcome.SUCCEEDED, strings.REM_RESUMED.format(
        job=job, state=_state(after), done=getattr(after, "done", "?"),
        total=getattr(after, "total", "?"))
