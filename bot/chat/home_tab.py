"""The App Home's edges: gather the fleet snapshot, publish it within the Slack budget.

``app_home_opened`` publishes the Home to that user at once; ``HomePublisher.refresh``
republishes to recent viewers whose view would differ, skipping a user when the shared
``views.publish`` budget says wait. ``HomeRefresher`` turns change signals (every
incident-message post or edit, progress included) into at most one refresh per interval,
off the caller's thread, and refreshes on its own now and then for the GPU samples.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from bot.chat.coalesce import wait_turn
from bot.chat.home import Fleet, HostGpus, IncidentRow, JobRow, classify_gpus, render_home
from bot.chat.text import visible_payload
from bot.core import metrics
from bot.domain.maintenance import MaintenanceWindow
from bot.domain.slurm import DrainedNode
from bot.jobs.states import JobState, JobStatus
from storage.connection import refusal
from storage.home import HomeViewers
from storage.incidents import IncidentStore
from storage.samples import SampleStore
from storage.slack_budget import SlackBudget

log = logging.getLogger(__name__)

FleetSource = Callable[[], Fleet]
RECENT_VIEWER_S = 86400.0
SAMPLE_WINDOW_S = 600.0


def host_gpus(samples: SampleStore, host: str, now: float, expected: int = 0) -> HostGpus:
    """The host's GPUs from its newest sample of each metric in the last window."""
    series = samples.host_series(host, now - SAMPLE_WINDOW_S, now + 1)
    latest = {name: points[-1][1] for name, points in series.items() if points}
    return classify_gpus(host, latest, expected)


def fleet_source(incidents: IncidentStore, samples: SampleStore,
                 jobs: Callable[[], Iterable[JobStatus]], expected: Mapping[str, int],
                 clock: Callable[[], float] = time.time,
                 maintenance: Callable[[], Iterable[MaintenanceWindow]] | None = None,
                 drained: Callable[[], Iterable[DrainedNode]] | None = None,
                 ) -> FleetSource:
    """A ``FleetSource`` over the bot's stores (``jobs``: ``queue.list_jobs`` bound;
    ``maintenance``: ``SilenceStore.maintenance`` bound, for the windows section;
    ``drained``: the flow's ``SlurmStep.drained.cached``, for the drained Slurm nodes)."""

    def snapshot() -> Fleet:
        now = clock()
        hosts = sorted(set(samples.hosts()) | set(expected))
        open_ = [IncidentRow(i.id, i.host, i.kind, i.state.value, i.first_seen)
                 for i in incidents.list(open_only=True)]
        running = [JobRow(j.name or j.job_id, j.host, j.done, j.total, j.rate)
                   for j in jobs() if j.state is JobState.RUNNING]
        return Fleet(now, tuple(host_gpus(samples, h, now, expected.get(h, 0)) for h in hosts),
                     tuple(open_), tuple(running),
                     tuple(maintenance()) if maintenance else (),
                     tuple(drained()) if drained else ())

    return snapshot


def view_digest(view: Mapping[str, Any]) -> str:
    """What a view shows, minus its "updated at" line: equal digests look the same."""
    blocks = [b for b in view.get("blocks", []) if b.get("type") != "context"]
    return hashlib.sha256(json.dumps(blocks, sort_keys=True).encode()).hexdigest()[:16]


class HomePublisher:
    def __init__(self, client: WebClient, source: FleetSource, viewers: HomeViewers,
                 budget: SlackBudget | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.client, self.source, self.viewers = client, source, viewers
        self.budget, self.clock = budget, clock
        self.skipped = 0  # viewers the last refresh left stale (budget): refresh again soon

    def opened(self, user: str) -> None:
        """The user opened the Home tab: record them and show the fleet now."""
        self.viewers.opened(user, self.clock())
        self._publish(user, render_home(self.source()), wait=True)

    def refresh(self) -> int:
        """Republish to recent viewers whose view changed; returns how many were sent."""
        view, sent, stale = render_home(self.source()), 0, 0
        digest = view_digest(view)
        for user in self.viewers.recent(self.clock() - RECENT_VIEWER_S):
            if self.viewers.shown(user) == digest:
                continue
            if self._publish(user, view, wait=False):
                sent += 1
            else:
                stale += 1
        self.skipped = stale
        return sent

    def _publish(self, user: str, view: dict[str, Any], *, wait: bool) -> bool:
        if (budget := self.budget) is not None:
            if wait:
                wait_turn(lambda: budget.try_call("views.publish"))
            elif budget.try_call("views.publish") > 0:
                return False  # the next refresh catches up; never spend over the budget
        # slack_sdk's handlers retry
        self.client.views_publish(user_id=user, view=visible_payload(view))
        self.viewers.mark_shown(user, view_digest(view))
        return True


class HomeRefresher:
    """One thread per process: ``poke()`` on a change; refreshes at most once per
    ``min_interval_s``, again soon when the budget left viewers stale, and every
    ``idle_s`` without a poke (GPU samples change without a chat message)."""

    def __init__(self, publisher: HomePublisher, min_interval_s: float = 2.0,
                 idle_s: float = 60.0) -> None:
        self.publisher, self.min_interval_s, self.idle_s = publisher, min_interval_s, idle_s
        self._wake, self._stop = threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def poke(self) -> None:
        """Something the Home shows may have changed; never blocks the caller."""
        if self._stop.is_set():
            return
        self._wake.set()
        self.start()

    def start(self) -> None:
        """Run the loop (idempotent): the first refresh comes on a poke or after ``idle_s``."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="home-refresh",
                                                daemon=True)
                self._thread.start()

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.idle_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.publisher.refresh()
            except Exception as exc:  # Redis or Slack down: the next change or tick tries again
                _failed(exc, "refreshing the App Home")
            if self.publisher.skipped:
                self._wake.set()
            self._stop.wait(self.min_interval_s)


def register_home(app: App, publisher: HomePublisher, executor: Executor,
                  refresher: HomeRefresher | None = None) -> None:
    """``app_home_opened`` (Home tab only) → publish, off the request thread; a viewer
    also starts the refresher, so their view follows the samples even while no chat
    message changes."""

    def on_opened(event: dict[str, Any]) -> None:
        user = str(event.get("user") or "")
        if user and event.get("tab", "home") == "home":
            executor.submit(_opened, publisher, user, refresher)

    app.event("app_home_opened")(on_opened)


def _opened(publisher: HomePublisher, user: str, refresher: HomeRefresher | None) -> None:
    try:
        publisher.opened(user)
    except Exception as exc:  # a failed Home publish is logged, never raised into Bolt
        _failed(exc, f"publishing the App Home for {user}")
    if refresher is not None:  # the view just went out: the next refresh is on a change
        refresher.start()


def _failed(exc: Exception, what: str) -> None:
    """Redis refusing (down, out of memory, read-only…) is a warning and a count: the Home
    is redrawn on the next change or tick once it accepts again. Anything else is ours."""
    why = refusal(exc)
    if why is None:
        log.exception("%s failed", what)
        return
    metrics.refused(why, "home")
    log.warning("%s failed, Redis unavailable (%s): %s", what, why, exc)
