"""The App Home's edges: gather the fleet snapshot, publish it within the Slack budget.

``app_home_opened`` publishes the Home to that user at once; ``HomePublisher.refresh``
(call it when incidents or jobs change) republishes to recent viewers whose view would
differ, skipping a user when the shared ``views.publish`` budget says wait.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from bot.chat.coalesce import wait_turn
from bot.chat.home import Fleet, HostGpus, IncidentRow, JobRow, classify_gpus, render_home
from bot.chat.slack import call_with_retry
from bot.extract.states import JobState, JobStatus
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
                 clock: Callable[[], float] = time.time) -> FleetSource:
    """A ``FleetSource`` over the bot's stores (``jobs``: ``queue.list_jobs`` bound)."""

    def snapshot() -> Fleet:
        now = clock()
        hosts = sorted(set(samples.hosts()) | set(expected))
        open_ = [IncidentRow(i.id, i.host, i.kind, i.state.value, i.first_seen)
                 for i in incidents.list(open_only=True)]
        running = [JobRow(j.name or j.job_id, j.host, j.done, j.total, j.rate)
                   for j in jobs() if j.state is JobState.RUNNING]
        return Fleet(now, tuple(host_gpus(samples, h, now, expected.get(h, 0)) for h in hosts),
                     tuple(open_), tuple(running))

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

    def opened(self, user: str) -> None:
        """The user opened the Home tab: record them and show the fleet now."""
        self.viewers.opened(user, self.clock())
        self._publish(user, render_home(self.source()), wait=True)

    def refresh(self) -> int:
        """Republish to recent viewers whose view changed; returns how many were sent."""
        view, sent = render_home(self.source()), 0
        digest = view_digest(view)
        for user in self.viewers.recent(self.clock() - RECENT_VIEWER_S):
            if self.viewers.shown(user) != digest and self._publish(user, view, wait=False):
                sent += 1
        return sent

    def _publish(self, user: str, view: dict[str, Any], *, wait: bool) -> bool:
        if (budget := self.budget) is not None:
            if wait:
                wait_turn(lambda: budget.try_call("views.publish"))
            elif budget.try_call("views.publish") > 0:
                return False  # the next refresh catches up; never spend over the budget
        call_with_retry("views.publish",
                        lambda: self.client.views_publish(user_id=user, view=view))
        self.viewers.mark_shown(user, view_digest(view))
        return True


def register_home(app: App, publisher: HomePublisher, executor: Executor) -> None:
    """``app_home_opened`` (Home tab only) → publish, off the request thread."""

    def on_opened(event: dict[str, Any]) -> None:
        user = str(event.get("user") or "")
        if user and event.get("tab", "home") == "home":
            executor.submit(_safe, publisher.opened, user)

    app.event("app_home_opened")(on_opened)


def _safe(fn: Callable[[str], None], user: str) -> None:
    try:
        fn(user)
    except Exception:  # a failed Home publish is logged, never raised into Bolt
        log.exception("publishing the App Home for %s failed", user)
