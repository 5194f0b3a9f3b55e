"""``extraction.resume``: the one catalog action that acts on the bot's queue, not a host.

It calls the jobs API's ``bot.jobs.queue.resume(store, job_id)`` directly (no wrapper
between, issue 34); the job itself skips finished samples and repairs half-written ones.
``bot.remediation.followup`` offers it (or chains it, per ``chain_resume``) after GPUs were freed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.core import strings
from bot.core.errors import UserError
from bot.domain.action_result import Outcome
from bot.remediation.options import RemediationOptions

if TYPE_CHECKING:
    from storage.jobs import JobStore


def preflight(options: RemediationOptions) -> JobStore:
    """Fail before anything is audited as started: no Redis for the bot's queue."""
    if options.jobs is None:
        raise UserError(strings.REM_RESUME_NO_REDIS, 2)
    return options.jobs


def _state(status: Any) -> str:
    state = getattr(status, "state", "?")
    return str(getattr(state, "value", state))


def resume_extraction(options: RemediationOptions, job: str) -> tuple[Outcome, str]:
    """Queue the job again; a job already queued or running is a no-op that says so."""
    from bot.jobs.queue import resume, status  # lazy: the catalog loads without the jobs API

    store = preflight(options)
    try:
        before = status(store, job)
        if _state(before) in ("queued", "running"):
            return Outcome.NOOP, strings.REM_RESUME_NOOP.format(job=job, state=_state(before))
        after = resume(store, job)
    except UserError as exc:  # unknown job, finished job: the extraction package says why
        return Outcome.FAILED, exc.message
    return Outcome.SUCCEEDED, strings.REM_RESUMED.format(
        job=job, state=_state(after), done=getattr(after, "done", "?"),
        total=getattr(after, "total", "?"))
