"""App Home end to end: a signed ``app_home_opened`` event → our Bolt app → a
``views.publish`` to the stand-in, from real Redis stores; refresh only on change."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from redis import Redis
from starlette.applications import Starlette

from bot.chat.home_tab import fleet_source
from bot.chat.slack_app import SlackApp, create_slack_app
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.jobs.states import JobState, JobStatus
from bot.rig.serving import ServedApp
from bot.rig.signed import SignedSender
from bot.rig.slack_standin import SlackStandIn
from storage.incidents import IncidentStore
from storage.samples import SampleStore
from storage.stores import Stores
from tests.fixtures.slack import BOT_TOKEN, SIGNING_SECRET, slack_test_settings

JOB = JobStatus(job_id="j1", state=JobState.RUNNING, done=250, total=1000, rate=2.5, eta_s=None,
                resumed_from=0, repaired={}, last_error=None, host="gpu-02", output_dir="/o",
                name="kimi-hidden")


@pytest.fixture
def home_app(slack_standin: SlackStandIn, redis: Redis) -> Iterator[tuple[SlackApp, SignedSender,
                                                                         IncidentStore]]:
    now = time.time()
    samples = SampleStore(redis)
    for i in range(2):
        samples.add_many("gpu-01", now - 30, [(f"gpu{i}.mem_used_mib", 77_600),
                                              (f"gpu{i}.util_pct", 0)])
        samples.add_many("gpu-02", now - 30, [(f"gpu{i}.mem_used_mib", 60_000),
                                              (f"gpu{i}.util_pct", 88)])
    incidents = IncidentStore(redis)
    incidents.open_or_fold(Alert(source="test", host="gpu-01", kind="vram_idle"))
    source = fleet_source(incidents, samples, lambda: [JOB], {"gpu-01": 2, "gpu-02": 3})
    app = create_slack_app(slack_test_settings(slack_standin), Stores(redis, redis), home=source)
    served = ServedApp(Starlette(routes=app.routes())).start()
    sender = SignedSender(f"{served.url}/slack/events", SIGNING_SECRET, slack_standin.base)
    yield app, sender, incidents
    sender.close()
    served.stop()
    app.close()


def opened(user: str) -> str:
    return json.dumps({"type": "event_callback", "team_id": "T0001", "api_app_id": "A1",
                       "event_id": f"Ev{user}", "event_time": int(time.time()),
                       "event": {"type": "app_home_opened", "user": user, "tab": "home",
                                 "channel": "D1"}})


def sections(view: dict[str, object]) -> list[str]:
    return [b["text"]["text"] for b in view["blocks"]  # type: ignore[attr-defined]
            if b["type"] == "section"]


def test_home_opened_publishes_the_fleet_and_refreshes_only_on_change(
        home_app: tuple[SlackApp, SignedSender, IncidentStore],
        slack_standin: SlackStandIn) -> None:
    app, sender, incidents = home_app
    assert sender.post(opened("UALICE")).status_code == 200
    (call,) = slack_standin.wait_for("views.publish", 1)
    assert call.params["user_id"] == "UALICE"
    summary, needs, fleet, open_, jobs = sections(slack_standin.home["UALICE"])
    assert summary.startswith("*2 hosts* · 5 GPUs: 2 busy · 2 held idle · 0 free · 1 broken")
    assert needs.splitlines()[1:] == ["1. *gpu-01* · 2 GPUs holding VRAM idle now"]
    assert fleet.splitlines() == [
        ":red_circle: *gpu-01* · 2 GPUs: 0 busy · 2 held idle · 0 free · 0 broken",
        ":red_circle: *gpu-02* · 3 GPUs: 2 busy · 0 held idle · 0 free · 1 broken"]
    assert open_.startswith(":new: *") and "gpu-01 · vram_idle · open · open under 1 min" in open_
    assert jobs == "*kimi-hidden* on gpu-02 · ▓▓░░░░░░░░ 25.0% · 250/1,000 · 2.50 samples/s"
    assert app.home is not None
    deadline = time.monotonic() + 10  # the publish is recorded right after Slack answers it
    while not app.home.viewers.shown("UALICE") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert app.home.refresh() == 0, "nothing changed: no views.publish"
    (incident,) = incidents.list(open_only=True)
    incidents.transition(incident.id, IncidentState.RESOLVED, "UALICE", "fixed by hand")
    assert app.home.refresh() == 1
    assert sections(slack_standin.home["UALICE"])[3] == "_Nothing open._"
    assert len(slack_standin.calls_of("views.publish")) == 2


def test_refresher_catches_up_viewers_the_budget_held_back(slack_standin: SlackStandIn,
                                                           redis: Redis) -> None:
    """Three viewers, one ``views.publish`` a second: a refresh reaches one, and the
    refresher keeps going until all three see the change, without waiting for a poke."""
    from slack_sdk import WebClient

    from bot.chat.home import Fleet, HostGpus
    from bot.chat.home_tab import HomePublisher, HomeRefresher
    from storage.home import HomeViewers
    from storage.slack_budget import BudgetSettings, SlackBudget

    shown: list[Fleet] = [Fleet(time.time(), (HostGpus("gpu-01", free=8),))]
    client = WebClient(token=BOT_TOKEN, base_url=slack_standin.api_url)
    budget = SlackBudget(redis, "W1", BudgetSettings(per_minute={"views.publish": 60.0},
                                                     burst=1))
    publisher = HomePublisher(client, lambda: shown[0], HomeViewers(redis, "W1"), budget)
    for user in ("U1", "U2", "U3"):
        publisher.viewers.opened(user, time.time())
        publisher.viewers.mark_shown(user, "an older view")
    refresher = HomeRefresher(publisher, min_interval_s=0.05, idle_s=600.0)
    try:
        refresher.poke()
        slack_standin.wait_for("views.publish", 3, 20)
    finally:
        refresher.close()
    assert set(slack_standin.home) == {"U1", "U2", "U3"}
    assert all("8 free" in sections(view)[0] for view in slack_standin.home.values())
    assert publisher.skipped == 0
