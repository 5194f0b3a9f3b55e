"""Extraction job states and the ETA rule: the words both sides of a job share.

The worker (``bot/extract``) writes a state and an ETA into the job's record; the bot
(``bot/jobs``) reads them back, combines them with RQ's view of the run and shows them.
Both import them from here, so neither imports the other.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    INTERRUPTED = "interrupted"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    FAILED = "failed"


FINAL = frozenset({JobState.COMPLETED, JobState.CANCELLED})
RESUMABLE = frozenset({JobState.PAUSED, JobState.INTERRUPTED, JobState.FAILED})
UNFINISHED = frozenset({JobState.QUEUED, JobState.RUNNING, *RESUMABLE})


def eta_seconds(done: int, total: int, rate: float | None) -> float | None:
    """Seconds left at ``rate`` samples per second (0 when done, None while unmeasured)."""
    if done >= total:
        return 0.0
    if not rate or rate <= 0:
        return None
    return (total - done) / rate
