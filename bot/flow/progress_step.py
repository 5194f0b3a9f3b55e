"""Step 3: a resumed extraction's progress, edited into one message in the incident thread.

Polled (by the scheduler's leader, or the demo's loop): read the job's status from Redis,
edit the progress message at most every ``progress_interval_s``, post the final summary
and resolve the incident when the job is done. Safe to run from any replica.
"""

from __future__ import annotations

from bot.chat.base import MessageRef
from bot.core import strings
from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.extract import queue
from bot.extract.progress import render_bar
from bot.extract.states import JobState, JobStatus
from bot.extract.status import final_summary
from bot.flow.context import FlowContext
from bot.flow.thread import note, post_in_thread

S = IncidentState
DONE = {JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED}


def progress_text(status: JobStatus) -> str:
    line = render_bar(status.progress)
    extra = f" · resumed at {status.resumed_from:,}" if status.resumed_from else ""
    error = f"\nlast error: {status.last_error}" if status.last_error else ""
    return f"`{status.name or status.job_id}` {status.state.value}: {line}{extra}{error}"


def _progress_ref(ctx: FlowContext, incident: Incident, text: str) -> MessageRef | None:
    """The one progress message in the thread: posted once, then edited."""
    stored = incident.meta.get("progress")
    if stored:
        return MessageRef(stored["channel"], stored["ts"])
    ref = post_in_thread(ctx, incident, text)
    if ref is not None:
        ctx.incidents.set_meta(incident.id, progress={"channel": ref.channel, "ts": ref.ts})
    return None  # just posted with the current text (or nowhere to post)


def poll_incident(ctx: FlowContext, incident_id: str) -> JobStatus | None:
    """One poll of one resumed incident; returns the job status it saw."""
    incident = ctx.incidents.require(incident_id)
    job_id = incident.meta.get("job")
    if not job_id or incident.state is not S.RESUMED:
        return None
    status = queue.status(ctx.redis_bytes, job_id)
    text = progress_text(status)
    ref = _progress_ref(ctx, incident, text)
    if ref is not None:
        ctx.chat.update(ref, note(text))
    if status.state in DONE:
        _finish(ctx, incident, status)
    return status


def _finish(ctx: FlowContext, incident: Incident, status: JobStatus) -> None:
    summary = final_summary(status)
    post_in_thread(ctx, incident, strings.FLOW_PROGRESS_DONE.format(summary=summary))
    ctx.audit.append(incident.id, ctx.bot_user, "extraction.finished", status.to_dict())
    goal = S.RESOLVED if status.state is JobState.COMPLETED else S.FAILED
    ctx.incidents.transition(incident.id, goal, ctx.bot_user, summary)


def poll_all(ctx: FlowContext) -> int:
    """Poll every resumed incident (the scheduler's progress job); returns how many."""
    resumed = [i for i in ctx.incidents.list(open_only=True) if i.state is S.RESUMED]
    for incident in resumed:
        poll_incident(ctx, incident.id)
    return len(resumed)
