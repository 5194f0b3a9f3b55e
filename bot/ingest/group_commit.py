"""Group commit for alert ingest: requests that arrive while a write is in flight are
applied together in the next write.

Why: with AOF ``appendfsync always`` every EXEC waits for an fsync, and concurrent
batches from one process WATCH the same group-window keys, so under four senders most
of the tail was WATCH conflicts retried (each retry a fresh plan and another fsync).
One writer per process turns N waiting requests into one plan, one EXEC and one
fsync; other replicas still meet this one's writes through WATCH, as before.

A request is answered only after the write that contains it has returned from EXEC,
so "a 2xx alert is on disk" holds unchanged; an error fails every request in that write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from starlette.concurrency import run_in_threadpool

from bot.domain.incident import Alert
from storage.incidents import IngestResult

Ingest = Callable[[Sequence[Alert]], IngestResult]
_Waiting = tuple[list[Alert], "asyncio.Future[IngestResult]"]


class GroupCommit:
    """One writer at a time; whatever queued meanwhile goes in its next write."""

    def __init__(self, ingest: Ingest, max_alerts: int = 2000) -> None:
        self._ingest = ingest
        self.max_alerts = max_alerts  # bounds one write's plan and script size
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
                result = await run_in_threadpool(self._ingest, combined)
            except Exception as exc:  # every request in this write answers with its error
                for _, f in batch:
                    if not f.done():
                        f.set_exception(exc)
                continue
            self.writes, self.requests = self.writes + 1, self.requests + len(batch)
            _split(result, batch)


def _split(result: IngestResult, batch: list[_Waiting]) -> None:
    start = 0
    for alerts, f in batch:
        part = IngestResult(result.outcomes[start:start + len(alerts)])
        start += len(alerts)
        if not f.done():
            f.set_result(part)
