"""The run's heartbeat thread: progress into ``job.meta``, the record and the stream.

It starts as soon as the run holds its lease, so loading a large model or scanning a
big output directory never looks like a dead worker; once ``begin`` gives it the totals
it also reports progress. At most one save every ``interval`` seconds however fast
samples finish; the same beat refreshes the lease and reads pause/cancel requests, so
the compute loop never waits on Redis for any of it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from bot.extract.progress import RateMeter, eta_seconds
from bot.extract.runner import Counters
from storage import job_records as records
from storage.connection import Redis
from storage.leases import Lease

log = logging.getLogger(__name__)


class Reporter:
    def __init__(
        self,
        conn: Redis,
        job_id: str,
        *,
        interval_s: float,
        lease: Lease | None = None,
        rq_job: Any = None,
    ) -> None:
        self.conn, self.job_id, self.interval = conn, job_id, interval_s
        self.lease, self.rq_job = lease, rq_job
        self.total = self.resumed_from = self.base_bytes = 0
        self.counters = Counters()
        self.meter = RateMeter()
        self._begun = False
        self._stop_request: str | None = None
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reporter", daemon=True)

    def begin(self, total: int, resumed_from: int, base_bytes: int) -> Reporter:
        """Totals are known (after the scan): from now on, beats carry progress."""
        self.total, self.resumed_from, self.base_bytes = total, resumed_from, base_bytes
        self.counters = Counters(done=resumed_from)
        self.meter = RateMeter().update(time.monotonic(), resumed_from)
        self._begun = True
        return self

    def stop_requested(self) -> str | None:
        return self._stop_request

    def start(self) -> Reporter:
        self._thread.start()
        return self

    def close(self) -> dict[str, Any]:
        """Stop the thread and write one last snapshot; return it."""
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.beat(event=False)

    def _loop(self) -> None:
        while not self._halt.wait(self.interval):
            try:
                self.beat()
            except Exception:
                log.warning("progress report for %s failed", self.job_id, exc_info=True)

    def snapshot(self, begun: bool = True) -> dict[str, Any]:
        now = f"{time.time():.3f}"
        if not begun:
            return {"updated_at": now}
        done, written, computed = self.counters.snapshot()
        self.meter = self.meter.update(time.monotonic(), done)
        rate = self.meter.rate
        eta = eta_seconds(done, self.total, rate)
        return {
            "done": done,
            "total": self.total,
            "rate": "" if rate is None else f"{rate:.4f}",
            "eta_s": "" if eta is None else f"{eta:.0f}",
            "resumed_from": self.resumed_from,
            "bytes_written": self.base_bytes + written,
            "run_computed": computed,
            "updated_at": now,
        }

    def beat(self, event: bool = True) -> dict[str, Any]:
        begun = self._begun  # read once: begin() may run in between
        snap = self.snapshot(begun)
        records.write(self.conn, self.job_id, **snap)
        if event and begun:
            records.event(self.conn, self.job_id, "progress", **snap)
        if self.rq_job is not None and begun:
            self.rq_job.meta.update(snap)
            self.rq_job.save_meta()
        if self.lease is not None:
            self.lease.renew()
        request = records.control(self.conn, self.job_id)
        if request in ("pause", "cancel"):
            self._stop_request = request
        return snap
