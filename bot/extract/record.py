"""The job record as one run sees it: the small interface the worker side reports through.

The run body (``bot/extract/job.py``) and its heartbeat (``reporter.py``) read the
submitted spec, write progress and the state the run ends in, read pause/cancel
requests, hold the run's lease and count sample failures, all through a ``RunRecord``
handed to them. The Redis-backed one is ``storage/jobs.py`` ``JobRun``, built by the RQ
entry point from the run's own connection; so nothing here imports Redis, RQ or storage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from bot.extract.runner import Failures


class SampleFailures(Failures, Protocol):
    """Tries per sample, kept across runs; ``skipped`` counts the samples given up on."""

    @property
    def skipped(self) -> int: ...


class RunLease(Protocol):
    """One run at a time per job: RQ delivers at least once, so a retry may overlap."""

    def wait_for(self, wait_s: float, on_wait: Callable[[], None] | None = None,
                 poll_s: float | None = None) -> float: ...

    def renew(self) -> bool: ...

    def release(self) -> bool: ...


class RunRecord(Protocol):
    """One job's record (a hash of strings), its event stream and its control request."""

    @property
    def job_id(self) -> str: ...

    @property
    def run_id(self) -> str | None:
        """The queue's id of this run (``ex-…-r2``); None when run outside a queue."""

    def read(self) -> dict[str, str]: ...

    def write(self, **fields: object) -> None: ...

    def event(self, kind: str, **fields: object) -> None: ...

    def add(self, **counts: int) -> None: ...

    def mark_started(self, now: str) -> None: ...

    def control(self) -> str | None:
        """``pause`` or ``cancel`` when a person asked the job to stop."""

    def clear_request(self) -> None: ...

    def failures(self, max_tries: int) -> SampleFailures: ...

    def lease(self, ttl_s: float) -> RunLease: ...

    def save_meta(self, snapshot: dict[str, Any]) -> None:
        """Mirror a progress snapshot where the queue's own tools show it (RQ's meta)."""
