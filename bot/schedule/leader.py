"""Periodic jobs run by exactly one bot replica: the holder of a Redis lease.

Why a lease and not a shared job store: two APScheduler instances must never share a
store, and a job store in Redis would still fire twice across a handover. So each
replica keeps an in-memory APScheduler and only the lease holder starts it. The lease
(``keys.scheduler_lease()``) is ``SET NX PX`` with a random token, renewed by a Lua
compare-and-extend every ``renew_s``; when the holder dies the key expires and a follower
takes over within ``lease_ttl_s + renew_s``.

Each firing belongs to a *slot*: the scheduled time it stands for, computed the same way
on every replica (intervals are anchored at the Unix epoch, cron times are absolute). A
firing first claims ``keys.firing(job, slot)`` with ``SET NX EX``; a replica that loses
the claim does nothing. A new leader catches up the latest slot it may have missed
during the handover (within ``catchup_s``), so a handover neither doubles nor skips it.
A slot is run at most once: a job that fails is not retried in the same slot.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.core import metrics
from storage import keys
from storage.claims import Claims
from storage.connection import StorageError as RedisError
from storage.leases import Lease

log = logging.getLogger(__name__)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
@dataclass(frozen=True)
class Firing:
    """One run of a job: the slot (scheduled time) it stands for, the same on every replica."""

    job: str
    slot: datetime

    @property
    def slot_id(self) -> str:
        return self.slot.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")

    @property
    def ts(self) -> float:
        return self.slot.timestamp()


@dataclass(frozen=True)
class ScheduledJob:
    """A named periodic job: exactly one of ``every_s`` or ``cron`` (crontab, in ``timezone``)."""

    name: str
    func: Callable[[Firing], None]
    every_s: float | None = None
    cron: str | None = None
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if (self.every_s is None) == (self.cron is None):
            raise ValueError(f"job {self.name!r}: give exactly one of every_s or cron")
        if self.every_s is not None and self.every_s <= 0:
            raise ValueError(f"job {self.name!r}: every_s must be positive")
        self.trigger()  # a bad crontab fails here, at start, not at the first firing

    def trigger(self) -> BaseTrigger:
        if self.every_s is not None:
            return IntervalTrigger(seconds=self.every_s, start_date=EPOCH, timezone=UTC)
        assert self.cron is not None
        return CronTrigger.from_crontab(self.cron, timezone=self.timezone)

    def latest_slot(self, now: datetime, lookback_s: float) -> datetime | None:
        """The most recent scheduled time ``<= now``, if within ``lookback_s``."""
        if self.every_s is not None:
            k = math.floor((now - EPOCH).total_seconds() / self.every_s)
            slot = EPOCH + timedelta(seconds=k * self.every_s)
            return slot if (now - slot).total_seconds() <= lookback_s else None
        trigger, last = self.trigger(), None
        t = trigger.get_next_fire_time(None, now - timedelta(seconds=lookback_s))
        while t is not None and t <= now:
            last = t
            t = trigger.get_next_fire_time(t, t + timedelta(microseconds=1))
        return last

    def guard_ttl_s(self) -> int:
        """How long a slot's claim lives: well past any replica's chance to fire it again."""
        return int(max(3600.0, 3 * (self.every_s or 86400.0)))


class LeaderScheduler:
    """APScheduler that runs only while this replica holds the lease."""

    def __init__(self, claims: Claims, lease: Lease, jobs: list[ScheduledJob], *,
                 renew_s: float = 5.0, catchup_s: float = 600.0,
                 clock: Callable[[], float] = time.time) -> None:
        """``lease`` is the scheduler's (``Stores.scheduler_lease``); ``claims`` guard
        each slot's firing."""
        if renew_s >= lease.ttl_s:
            raise ValueError("renew_s must be shorter than lease_ttl_s")
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate job names: {names}")
        self.claims, self.lease, self.jobs = claims, lease, jobs
        self.renew_s, self.catchup_s, self.clock = renew_s, catchup_s, clock
        self._leading = False
        self._sched: BackgroundScheduler | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def is_leader(self) -> bool:
        return self._leading

    def start(self) -> LeaderScheduler:
        self._thread = threading.Thread(target=self._loop, name="scheduler-lease", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.renew_s)

    def tick(self) -> None:
        """Renew (leader) or try to take (follower) the lease; start/stop jobs to match."""
        try:
            if self._leading:
                if not self.lease.renew():
                    self._step_down("lease lost to another replica")
            elif self.lease.acquire():
                self._step_up()
        except RedisError as exc:
            if self._leading:
                self._step_down(f"redis error: {exc}")
            else:
                log.warning("scheduler cannot reach redis: %s", exc)

    def _step_up(self) -> None:
        with self._lock:
            sched = BackgroundScheduler(timezone=UTC, job_defaults={
                "coalesce": True, "max_instances": 1, "misfire_grace_time": int(self.catchup_s)})
            for spec in self.jobs:
                sched.add_job(self.fire, spec.trigger(), args=[spec], id=spec.name, name=spec.name)
            self._leading = True
            self._sched = sched
            sched.start()
        metrics.SCHEDULER_LEADER.set(1)
        log.info("scheduler: became leader (%s), %d jobs", self.lease.token, len(self.jobs))
        # not on the lease thread (a long job must not delay renewal), not as APScheduler
        # one-off jobs (they race its shutdown): a plain thread, claims keep it single
        threading.Thread(target=self._catch_up, name="scheduler-catchup", daemon=True).start()

    def _catch_up(self) -> None:
        """Run each job's latest slot if the previous leader did not (missed in handover)."""
        for spec in self.jobs:
            self.fire(spec)

    def _step_down(self, why: str, level: int = logging.WARNING) -> None:
        with self._lock:
            self._leading = False
            sched, self._sched = self._sched, None
        metrics.SCHEDULER_LEADER.set(0)
        if sched is not None:
            sched.shutdown(wait=False)
        log.log(level, "scheduler: stepped down: %s", why)

    def fire(self, spec: ScheduledJob, now: float | None = None) -> bool:
        """Run ``spec`` for its latest slot unless that slot was already claimed."""
        if not self._leading:
            return False
        at = datetime.fromtimestamp(self.clock() if now is None else now, UTC)
        slot = spec.latest_slot(at, self.catchup_s)
        if slot is None:
            return False
        firing = Firing(spec.name, slot)
        key = keys.firing(spec.name, firing.slot_id)
        if not self.claims.claim(key, self.lease.token, spec.guard_ttl_s()):
            metrics.SCHEDULER_FIRINGS.labels(job=spec.name, outcome="duplicate").inc()
            return False
        try:
            spec.func(firing)
        except Exception:
            metrics.SCHEDULER_FIRINGS.labels(job=spec.name, outcome="error").inc()
            log.exception("scheduled job %s (slot %s) failed", spec.name, firing.slot_id)
            return False
        metrics.SCHEDULER_FIRINGS.labels(job=spec.name, outcome="ran").inc()
        return True

    def stop(self, release: bool = True) -> None:
        """Stop renewing; step down; hand the lease over at once when ``release``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.renew_s + 5)
        was_leader = self._leading
        if was_leader:
            self._step_down("stopped", logging.INFO)
        if release and was_leader:
            try:
                self.lease.release()
            except RedisError as exc:
                log.warning("scheduler: could not release lease: %s", exc)


def run_forever(scheduler: LeaderScheduler, stop: threading.Event) -> None:
    """Block until ``stop`` is set (``serve`` and the CLI own the signal handling)."""
    scheduler.start()
    try:
        stop.wait()
    finally:
        scheduler.stop()

