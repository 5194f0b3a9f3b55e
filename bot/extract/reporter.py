"""The run's heartbeat thread: progress into the job's record, its stream and RQ's meta.

It starts as soon as the run holds its lease, so loading a large model or scanning a
big output directory never looks like a dead worker; once ``begin`` gives it the totals
it also reports progress. At most one save every ``interval`` seconds however fast
samples finish; the same beat refreshes the lease and reads pause/cancel requests, so
the compute loop never waits on Redis for any of it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from bot.domain.jobs import eta_seconds
from bot.extract.record import RunLease, RunRecord
from bot.extract.runner import Counters

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RateMeter:
    """Exponentially smoothed rate over wall time (time constant ``tau_s``).

    Weighting by elapsed time, not by update count, keeps the rate honest when
    reports arrive irregularly (a long batch, a paused reporter).
    """

    rate: float | None = None
    last_t: float | None = None
    last_done: int = 0
    tau_s: float = 60.0

    def update(self, t: float, done: int) -> RateMeter:
        if self.last_t is None:
            return RateMeter(None, t, done, self.tau_s)
        dt = t - self.last_t
        if dt <= 0:
            return self
        instant = max(0, done - self.last_done) / dt
        if self.rate is None:
            smoothed = instant
        else:
            alpha = 1.0 - math.exp(-dt / self.tau_s)
            smoothed = self.rate + alpha * (instant - self.rate)
        return RateMeter(smoothed, t, done, self.tau_s)


class Reporter:
    def __init__(
        self, record: RunRecord, *, interval_s: float, lease: RunLease | None = None
    ) -> None:
        self.record, self.job_id, self.interval = record, record.job_id, interval_s
        self.lease = lease
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
        self.record.write(**snap)
        if event and begun:
            self.record.event("progress", **snap)
        if begun:
            self.record.save_meta(snap)
        if self.lease is not None:
            self.lease.renew()
        request = self.record.control()
        if request in ("pause", "cancel"):
            self._stop_request = request
        return snap
