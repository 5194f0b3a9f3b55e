"""The bot's side of the extraction jobs: what the flow reads and writes about them.

The torch job itself runs on the GPU host (``bot/extract/job.py``); the bot only reads
job records and queues resumes. Steps get one ``JobBook`` built in
``bot/flow/assembly.py`` over a ``storage/jobs.py`` ``JobStore``, never a Redis client.
"""

from __future__ import annotations

import builtins

from bot.jobs import queue
from bot.jobs.states import UNFINISHED, JobStatus
from bot.jobs.status import interrupted_jobs
from storage.jobs import JobStore


class JobBook:
    """Job status, the host's interrupted and unfinished jobs, and the incident link."""

    def __init__(self, store: JobStore) -> None:
        self._store = store

    def status(self, job_id: str) -> JobStatus:
        """Raises ``UserError`` for a job id that has no record."""
        return queue.status(self._store, job_id)

    def list(self, host: str | None = None) -> builtins.list[JobStatus]:
        return queue.list_jobs(self._store, host)

    def interrupted(self, host: str) -> builtins.list[str]:
        """Jobs on ``host`` that stopped without finishing (paused, interrupted,
        failed: not finished and not moving; vm_restart reports them)."""
        return [s.job_id for s in interrupted_jobs(self._store, host)]

    def unfinished_output_dirs(self, host: str) -> tuple[str, ...]:
        """Output directories of ``host``'s unfinished jobs (queued, running, paused,
        interrupted, failed): what a disk cleanup must never delete."""
        return tuple(sorted({j.output_dir.rstrip("/") for j in self.list(host)
                             if j.state in UNFINISHED and j.output_dir.startswith("/")}))

    def link(self, job_id: str, incident_id: str) -> None:
        self._store.link(job_id, incident_id)
