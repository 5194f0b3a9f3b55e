"""Group commit for alert ingest: requests that arrive while a write is in flight are
applied together in the next write.

Why: with AOF ``appendfsync always`` every EXEC waits for an fsync, and concurrent
batches from one process WATCH the same group-window keys, so under four senders most
of the tail was WATCH conflicts retried (each retry a fresh plan and another fsync).
One writer per process turns N waiting requests into one plan, one EXEC and one
fsync; other replicas still meet this one's writes through WATCH, as before.

A request is answered only after the write that contains it has returned from EXEC,
so "a 2xx alert is on disk" holds unchanged; an error fails every request in that write.

An HA pair of Alertmanagers sends every notification twice at about the same time, and
Alertmanager resends a group's alerts. A delivery whose identity this writer wrote
moments ago (``RecentWrites``) is answered "duplicate" without another read, plan and
fsync: its first copy is already on disk. That halves the work of an HA pair's storm
and takes the second copy's wait for a write of its own out of the tail.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from starlette.concurrency import run_in_threadpool

from bot.core import metrics
from bot.domain.incident import Alert
from bot.domain.planner import PlanOutcome
from storage.incidents import IngestResult

Ingest = Callable[[Sequence[Alert]], IngestResult]
Outcome = tuple[PlanOutcome, str | None]
_Waiting = tuple[list[Alert], "asyncio.Future[IngestResult]"]


def observed(ingest: Ingest) -> Ingest:
    """``ingest`` with each call's wall time in ``incident_bot_ingest_write_duration_seconds``."""
    def write(alerts: Sequence[Alert]) -> IngestResult:
        with metrics.INGEST_WRITE.time():
            return ingest(alerts)
    return write


class RecentWrites:
    """Dedup identities this process's writes applied (or found applied) in the last
    ``ttl_s``, with the incident each fed. Bounded by age and by count; silenced alerts
    are not kept (the store keeps no marker for them)."""

    def __init__(self, ttl_s: float = 30.0, max_keys: int = 50_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s, self.max_keys, self.clock = ttl_s, max_keys, clock
        self._seen: OrderedDict[str, tuple[float, str | None]] = OrderedDict()

    def known(self, alert: Alert) -> Outcome | None:
        """``(DUPLICATE, incident)`` when this delivery was written moments ago."""
        hit = self._seen.get(alert.dedup_key) if alert.dedup_key else None
        if hit is None or self.clock() - hit[0] > self.ttl_s:
            return None
        return PlanOutcome.DUPLICATE, hit[1]

    def add(self, alerts: Sequence[Alert], outcomes: Sequence[Outcome]) -> None:
        now = self.clock()
        for alert, (outcome, incident_id) in zip(alerts, outcomes, strict=True):
            if alert.dedup_key and outcome is not PlanOutcome.SILENCED:
                self._seen[alert.dedup_key] = (now, incident_id)
                self._seen.move_to_end(alert.dedup_key)
        while self._seen and (len(self._seen) > self.max_keys
                              or now - next(iter(self._seen.values()))[0] > self.ttl_s):
            self._seen.popitem(last=False)


class GroupCommit:
    """One writer at a time; whatever queued meanwhile goes in its next write."""

    def __init__(self, ingest: Ingest, max_alerts: int = 2000,
                 recent: RecentWrites | None = None) -> None:
        self._ingest = ingest
        self.max_alerts = max_alerts  # bounds one write's plan and script size
        self.recent = recent or RecentWrites()
        self._waiting: list[_Waiting] = []
        self._writer: asyncio.Task[None] | None = None
        self.writes = self.requests = 0  # store writes, and the requests they answered

    async def submit(self, alerts: Sequence[Alert]) -> IngestResult:
        """The outcomes for ``alerts``, once they are written with whatever else queued."""
        if not alerts:
            return IngestResult()
        done: asyncio.Future[IngestResult] = asyncio.get_running_loop().create_future()
        self._waiting.append((list(alerts), done))
        loop = asyncio.get_running_loop()
        if self._writer is None or self._writer.done() or self._writer.get_loop() is not loop:
            self._writer = loop.create_task(self._drain())
        return await done

    def _take(self) -> list[_Waiting]:
        """The oldest waiting requests, at least one, up to ``max_alerts`` alerts."""
        taken: list[_Waiting] = []
        size = 0
        while self._waiting and (not taken or size + len(self._waiting[0][0]) <= self.max_alerts):
            item = self._waiting.pop(0)
            taken.append(item)
            size += len(item[0])
        return taken

    async def _drain(self) -> None:
        while self._waiting:
            batch = [(alerts, f) for alerts, f in self._take() if not f.cancelled()]
            if not batch:
                continue
            combined = [a for alerts, _ in batch for a in alerts]
            try:
                result = await self._write(combined)
            except Exception as exc:  # every request in this write answers with its error
                for _, f in batch:
                    if not f.done():
                        f.set_exception(exc)
                continue
            self.requests += len(batch)
            _split(result, batch)

    async def _write(self, alerts: list[Alert]) -> IngestResult:
        """The outcomes of ``alerts``; only those not written moments ago go to the store."""
        known = [self.recent.known(a) for a in alerts]
        fresh = [a for a, k in zip(alerts, known, strict=True) if k is None]
        written: list[Outcome] = []
        if fresh:
            written = (await run_in_threadpool(self._ingest, fresh)).outcomes
            self.writes += 1
            self.recent.add(fresh, written)
        it = iter(written)
        return IngestResult([k if k is not None else next(it) for k in known])


def _split(result: IngestResult, batch: list[_Waiting]) -> None:
    start = 0
    for alerts, f in batch:
        part = IngestResult(result.outcomes[start:start + len(alerts)])
        start += len(alerts)
        if not f.done():
            f.set_result(part)
