"""What the rest of the bot asks about extraction jobs.

``interrupted_jobs`` is what the vm_restart playbook reports, ``progress_events`` feeds
the one progress message the bot edits in the incident thread, and ``final_summary`` is
its closing line. The ``extraction.resume`` remediation calls ``queue.resume`` itself.
"""

from __future__ import annotations

from bot.core import fmt, metrics, strings
from bot.jobs import queue
from bot.jobs.states import RESUMABLE, JobState, JobStatus
from storage import keys
from storage.jobs import JobStore

INTERRUPTED_STATES = RESUMABLE  # paused, interrupted, failed: not finished and not moving


def interrupted_jobs(store: JobStore, host: str) -> list[JobStatus]:
    """Jobs on ``host`` that stopped without finishing (worker died, paused, failed)."""
    return [s for s in queue.list_jobs(store, host) if s.state in INTERRUPTED_STATES]


def progress_events(store: JobStore, job_id: str, since_id: str = "0-0") -> list[dict[str, str]]:
    """Stream events after ``since_id``: started/resumed, progress, sample_skipped,
    disk_full, paused, cancelled, completed, error, requeued. Each has ``id`` and ``type``."""
    return store.events_since(job_id, since_id)


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def final_summary(status: JobStatus) -> str:
    """Pure: "demo: completed 200/200 in 41s · 1 partial file removed, … · 1.2 MB written"."""
    repairs = []
    partial, corrupt = (
        status.repaired.get("partial_removed", 0),
        status.repaired.get("corrupt_recomputed", 0),
    )
    if partial:
        repairs.append(strings.EXTRACT_PARTIAL_REMOVED.format(n=partial, s=_plural(partial)))
    if corrupt:
        repairs.append(strings.EXTRACT_CORRUPT_RECOMPUTED.format(n=corrupt, s=_plural(corrupt)))
    start = status.first_started_at or status.created_at
    end = status.finished_at or status.updated_at
    duration = end - start if start is not None and end is not None else None
    text = strings.EXTRACT_SUMMARY.format(
        name=status.name or status.job_id,
        state=status.state.value,
        done=f"{status.done:,}",
        total=f"{status.total:,}",
        duration=fmt.duration(duration),
        repairs=", ".join(repairs) or strings.EXTRACT_NO_REPAIRS,
        bytes=fmt.size(status.bytes_written),
    )
    if status.skipped:
        text += strings.EXTRACT_SUMMARY_SKIPPED.format(n=status.skipped, s=_plural(status.skipped))
    if status.state is not JobState.COMPLETED and status.last_error:
        text += f" · {status.last_error}"
    return text


def refresh_job_metrics(store: JobStore) -> None:
    """Mirror jobs into the ``/metrics`` gauges: progress and rate of unfinished jobs (a
    finished job's series is dropped) and each host queue's depth."""
    hosts = set()
    for job in queue.list_jobs(store):
        hosts.add(job.host)
        if job.state in (JobState.COMPLETED, JobState.CANCELLED):
            metrics.forget_job(job.job_id, job.host)
        else:
            metrics.set_job_progress(job.job_id, job.host, job.done, job.total, job.rate)
    for host in hosts:
        metrics.QUEUE_DEPTH.labels(queue=keys.queue_name(host)).set(store.queue_depth(host))
