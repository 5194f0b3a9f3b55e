"""``extraction.resume``: the one catalog action that acts on the bot's queue, not a host.

It calls the extraction package's ``resume_job(redis, job_id)``; the job itself
skips finished samples and repairs half-written ones. ``bot.remediation.followup``
offers it (or chains it, per ``chain_resume``) after GPUs were freed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from bot.core import strings
from bot.core.errors import NotBuiltError, UserError
from bot.remediation.options import RemediationOptions
from bot.remediation.result import Outcome

ResumeFn = Callable[[Any, str], Any]


def _extract(name: str, attr: str) -> Callable[..., Any]:
    try:
        fn: Callable[..., Any] = getattr(importlib.import_module(name), attr)
    except (ImportError, AttributeError):
        raise NotBuiltError(f"extraction.resume ({name}.{attr})") from None
    return fn


def preflight(options: RemediationOptions) -> ResumeFn:
    """Fail before anything is audited as started: no Redis, or no extraction package."""
    if options.redis is None:
        raise UserError(strings.REM_RESUME_NO_REDIS, 2)
    return _extract("bot.extract.status", "resume_job")


def _state(status: Any) -> str:
    state = getattr(status, "state", "?")
    return str(getattr(state, "value", state))


def resume_extraction(options: RemediationOptions, job: str) -> tuple[Outcome, str]:
    """Queue the job again; a job already queued or running is a no-op that says so."""
    resume_job = preflight(options)
    try:
        before = _extract("bot.extract.queue", "status")(options.redis, job)
        if _state(before) in ("queued", "running"):
            return Outcome.NOOP, strings.REM_RESUME_NOOP.format(job=job, state=_state(before))
        after = resume_job(options.redis, job)
    except UserError as exc:  # unknown job, finished job: the extraction package says why
        return Outcome.FAILED, exc.message
    return Outcome.SUCCEEDED, strings.REM_RESUMED.format(
        job=job, state=_state(after), done=getattr(after, "done", "?"),
        total=getattr(after, "total", "?"))
