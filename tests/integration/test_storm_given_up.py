"""A storm's member whose diagnosis never came still gets its card (issue 39's chaos run,
seed 4242, gpu-05 #21: INC-129). Through the assembled flow (``build_flow``), a real
redis-server and the Slack stand-in over HTTP: a member waits for its diagnosis as a row of
the storm's table; when the reconciler gives the diagnosis up (Redis refused its end three
times) the incident is ``diagnosis_failed`` with no diagnosis, and its card, with Retry, is
posted in the storm's thread, where its later replies (the closing note) then go. Before,
it had no card at all and its closing note was dropped as "nothing posted yet"."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar, cast

import pytest
from redis import Redis

from bot.chat.outbox import CARD, STORM_TABLE
from bot.chat.slack import SlackBackend, make_client
from bot.domain.flow import AlertCleared, ResolveAsked, StepAbandoned
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.flow.assembly import Flow, build_flow
from bot.rig.slack_standin import SlackStandIn
from bot.ssh.pool import ParamikoPool
from storage.stores import Stores
from tests.fixtures.bots import wait_until
from tests.fixtures.slack import CHANNEL, slack_test_settings

S = IncidentState
T = TypeVar("T")


@pytest.fixture
def flow(slack_standin: SlackStandIn, redis: Redis) -> Iterator[Flow]:
    base = slack_test_settings(slack_standin, storm={"per_minute": 3})
    settings = base.model_copy(update={"alerts": base.alerts.model_copy(
        update={"group_wait_s": 0.0})})  # one incident per host: no group
    pool = ParamikoPool(settings.ssh_defaults)
    chat = SlackBackend(make_client(settings, timeout_s=2))
    yield build_flow(settings, Stores(redis, redis), pool, chat)
    pool.close()


def drained(flow: Flow, done: Callable[[], T | None], what: str) -> T:
    """Drain the outbox (at Slack's pace) until ``done`` holds."""
    def step() -> T | None:
        flow.outbox.drain_once(time.time())
        return done()
    return cast(T, wait_until(step, 60, what))


def test_a_member_given_up_without_a_diagnosis_gets_its_card_in_the_storm_thread(
        flow: Flow, slack_standin: SlackStandIn) -> None:
    incidents, storms = flow.incidents, flow.storms
    assert storms is not None
    ids = [incidents.open_or_fold(Alert("alertmanager", f"gpu-0{n}", "vram_idle"))[0].id
           for n in range(1, 6)]
    for incident_id in ids:  # as the consumer reads each opened event
        flow.publisher.announce(incident_id)
    storm = storms.storm_of(ids[-1])
    assert storm is not None and storms.store.members(storm) == ids, "one storm holds them"
    table = drained(flow, lambda: flow.outbox.posted(storm, STORM_TABLE), "the storm's table")
    # the last came while the storm was on: its row is all it has until its diagnosis
    member = ids[-1]
    assert flow.outbox.store.pending(member) == 0, "no alert card of its own"

    incidents.transition(member, S.DIAGNOSING, "bot", "alert received")
    # Redis refused its diagnosis's end three times: the reconciler gives it up
    abandoned = StepAbandoned(time.time(), "reconciler", S.DIAGNOSING, 2, "deadline passed")
    flow.flow_runner.handle(member, abandoned)
    given_up = incidents.require(member)
    assert given_up.state is S.DIAGNOSIS_FAILED and given_up.diagnosis is None

    chat = drained(flow, lambda: incidents.require(member).chat, "the member's card")
    assert chat.thread_ts == table.ts != chat.ts, "a reply under the storm's table"
    card = slack_standin.messages[(CHANNEL, chat.ts)]
    assert card.get("thread_ts") == table.ts
    assert "incident_retry" in str(card.get("blocks")), "its card offers Retry"
    tops = [m.get("ts") for m in slack_standin.top_level(CHANNEL)]
    assert tops == [table.ts], "no message of its own in the channel"

    # resolved: its closing note goes under its card's thread, not dropped
    flow.flow_runner.handle(member, ResolveAsked(time.time(), "UALICE"))
    flow.flow_runner.handle(member, AlertCleared(time.time(), "incident-bot"))  # its event
    note = f"Postmortem {member}"
    drained(flow, lambda: any(note in str(m.get("text")) and m.get("thread_ts") == table.ts
                              for m in list(slack_standin.messages.values())), "its closing note")
    assert flow.outbox.posted(member, CARD) is not None
