"""Step 4: a resumed extraction's progress, edited into one message in the incident thread.

Polled (by the scheduler's leader, or the demo's loop): read the job's status from Redis,
add ``(now, done)`` to the moving-average window kept in the incident's meta, and edit the
one progress message only when what it shows changed and ``progress_interval_s`` has
passed since the last edit. When the job is done, post the closing line (true duration,
mean rate, written/skipped/repaired) and resolve the incident. Safe from any replica.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from bot.chat.base import MessageRef
from bot.core import strings
from bot.domain.flow import ExtractionFinished, ProgressShown
from bot.domain.incident import Incident
from bot.domain.incident_record import ProgressTracker
from bot.domain.lifecycle import IncidentState
from bot.flow.message import Publisher
from bot.flow.runner import FlowRunner
from bot.jobs.book import JobBook
from bot.jobs.progress import RateWindow, RunTotals, finished_line, progress_line
from bot.jobs.states import JobState, JobStatus
from storage.audit import AuditLog
from storage.incidents import IncidentStore

PROGRESS = "progress"  # the outbox purpose of the one progress message per incident
DONE = {JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED}


def job_label(status: JobStatus) -> str:
    """The job's one name in chat: its given name, else its id."""
    return status.name or status.job_id


def progress_text(status: JobStatus, now: float | None = None,
                  window: RateWindow | None = None) -> str:
    """One line: name, state, bar, done/total, moving-average rate and absolute ETA.

    With ``window`` (the thread) the rate is its moving average, "measuring…" until it
    has enough samples; without (``/ir jobs``) the job's own smoothed rate is shown.
    Every count comes from ``status.done``/``status.total``.
    """
    rate = status.rate if window is None else window.rate()
    line = progress_line(status.done, status.total, rate, time.time() if now is None else now,
                         moving=status.state is JobState.RUNNING)
    extra = f" · resumed at {status.resumed_from:,}" if status.resumed_from else ""
    error = f"\nlast error: {status.last_error}" if status.last_error else ""
    return f"*{job_label(status)}* {status.state.value}: {line}{extra}{error}"


StatusReader = Callable[[str], JobStatus]


class ProgressStep:
    """Polls resumed incidents' jobs and keeps their one progress line current."""

    def __init__(self, flow_runner: FlowRunner, incidents: IncidentStore, jobs: JobBook,
                 publisher: Publisher, audit: AuditLog, *, interval_s: float = 2.0,
                 bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.flow_runner = flow_runner  # every change to the incident: an event decided there
        self.incidents = incidents
        self.jobs = jobs
        self.publisher = publisher
        self.audit = audit
        self.interval_s = interval_s
        self.bot_user = bot_user
        self.clock = clock

    def poll_incident(self, incident_id: str,
                      read_status: StatusReader | None = None) -> JobStatus | None:
        """One poll of one resumed incident; returns the job status it saw."""
        incident = self.incidents.require(incident_id)
        job_id = incident.job_id
        if not job_id or incident.state is not IncidentState.RESUMED:
            return None
        status, now = (read_status or self.jobs.status)(job_id), self.clock()
        before = incident.progress or ProgressTracker()
        window = RateWindow(before.samples).add(now, status.done)
        tracker = replace(before, samples=window.samples,
                          started_at=now if before.started_at is None else before.started_at,
                          started_done=status.done if before.started_done is None
                          else before.started_done)
        text = progress_text(status, now, window)
        tracker = self._show(incident, tracker, text, now, force=status.state in DONE)
        self.flow_runner.handle(incident.id, ProgressShown(now, self.bot_user, tracker))
        if status.state in DONE:
            self._finish(incident, status, tracker, now)
        return status


    def _show(self, incident: Incident, tracker: ProgressTracker, text: str,
              now: float, force: bool = False) -> ProgressTracker:
        """Post the one progress message once; later, edit it only when its text changed and
        at most once per ``progress_interval_s``. Returns the tracker as now shown."""
        if not tracker.ts:
            ref = self.publisher.reply(incident, text, purpose=PROGRESS)
            if ref is None:  # waiting in the outbox: the next poll's reply edits it
                return tracker
            return replace(tracker, channel=ref.channel, ts=ref.ts, shown=text, shown_at=now)
        if text == tracker.shown:
            return tracker
        if not force and now - tracker.shown_at < self.interval_s:
            return tracker
        self.publisher.edit(incident, MessageRef(tracker.channel, tracker.ts), text, PROGRESS)
        return replace(tracker, shown=text, shown_at=now)


    def _finish(self, incident: Incident, status: JobStatus,
                tracker: ProgressTracker, now: float) -> None:
        fresh = not status.resumed_from and status.first_started_at  # else: since the resume
        started = status.first_started_at if fresh else tracker.started_at
        totals = RunTotals(
            label=job_label(status), state=status.state.value, done=status.done,
            total=status.total, resumed_from=status.resumed_from, skipped=status.skipped,
            repaired=sum(status.repaired.values()),
            counted_from=0 if fresh else int(tracker.started_done or status.resumed_from),
            started_at=float(started or now),
            finished_at=status.finished_at or status.updated_at or now,
            repair_note=_repairs(status))
        summary = finished_line(totals)
        self.publisher.reply(incident, strings.FLOW_PROGRESS_DONE.format(summary=summary))
        self.audit.append(incident.id, self.bot_user, "extraction.finished", status.to_dict())
        done = status.state is JobState.COMPLETED  # resolved, else action_failed
        self.flow_runner.handle(incident.id, ExtractionFinished(self.clock(), self.bot_user,
                                                                done, summary))


    def poll_all(self) -> int:
        """Poll every resumed incident (the scheduler's progress job); returns how many."""
        resumed = [i for i in self.incidents.list(open_only=True)
                   if i.state is IncidentState.RESUMED]
        for incident in resumed:
            self.poll_incident(incident.id)
        return len(resumed)


def _repairs(status: JobStatus) -> str:
    partial = status.repaired.get("partial_removed", 0)
    corrupt = status.repaired.get("corrupt_recomputed", 0)
    notes = [strings.EXTRACT_PARTIAL_REMOVED.format(n=partial, s="" if partial == 1 else "s")
             if partial else "",
             strings.EXTRACT_CORRUPT_RECOMPUTED.format(n=corrupt, s="" if corrupt == 1 else "s")
             if corrupt else ""]
    return ", ".join(n for n in notes if n)
