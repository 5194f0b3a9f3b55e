"""A card that reached the channel but whose answer never came back, then Redis restarted
empty: the re-opened incident takes that card over instead of posting a second one (issue
39, chaos seed 4242: INC-5837 / INC-5840). Real processes: a ``serve``, a private
``redis-server`` (restarted empty), the seed host behind a real sshd; only Slack is a
stand-in.

The Slack stand-in acts on the card's ``chat.postMessage`` but closes the connection
without an answer (the chaos run's stand-in answered 12 s late, past the client's 10 s
timeout), then answers 500 for a while, so the outbox's retry cannot look the post up
before the wipe takes the outbox with the incident. The lost incident had no message as
far as anything in Redis knew.

Before: the watch re-opened it as a new incident with nothing to take over, and the new
incident posted a second top-level card; the first stayed in the channel for good, never
edited (two messages for one alert: the chaos checker's "answered" invariant).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.core import strings
from bot.domain.lifecycle import IncidentState
from bot.rig.slack_standin import Call
from bot.sim.sshd import SimHost
from tests.fixtures.alerts import am_alert, am_payload
from tests.helpers.ground import Ground
from tests.helpers.serve_process import wait_until

S = IncidentState
RECONCILE = {"every_s": 1.0, "open_s": 10.0, "diagnosing_s": 20.0, "acting_s": 25.0}
HEAD = strings.DATA_LOSS_HEAD.split(" (")[0]  # the data-loss announcement's first words
OUTAGE_S = 10.0  # Slack answers 500 this long after the card's post: past the wipe
DIAGNOSIS_S = 15.0 + OUTAGE_S  # one diagnosis of the seed host, after Slack answers again


@pytest.fixture
def ground(tmp_path: Path, sim_factory: Callable[..., SimHost]) -> Iterator[Ground]:
    rig = Ground.start(tmp_path, sim_factory("seed"), RECONCILE)
    try:
        yield rig
    finally:
        rig.stop()


def firing(ground: Ground, fp: str) -> None:
    payload = am_payload(am_alert("gpu-01", "GpuMemoryHeldIdle", fp=fp))
    assert ground.serve.post_alert(payload, timeout_s=30).status_code == 200


def outage_after_first_post(ground: Ground) -> None:
    """Slack answers 500 for ``OUTAGE_S`` from the first ``chat.postMessage`` on (which
    itself is acted on: the outage starts after)."""
    started: list[float] = []

    def on_call(call: Call) -> None:
        if call.method == "chat.postMessage" and not started:
            started.append(time.monotonic())
            ground.standin.outage(OUTAGE_S)

    ground.standin.on_call = on_call


def for_the_alert(ground: Ground) -> list[dict[str, Any]]:
    """The channel's top-level messages, less the data-loss announcement."""
    return [m for m in ground.parents() if HEAD not in json.dumps(m)]


def wiped_and_reopened(ground: Ground, old_id: str) -> str:
    """Redis restarted empty; the id of the incident the watch re-opened ``old_id`` as."""
    old = ground.get(old_id)
    assert old is not None and old.chat is None, old  # its card's ts never came back
    ground.redis.wipe()
    new = ground.wait_incident(lambda i: i.source == "recovered", 30, "re-opened")
    assert new.id != old_id and new.chat is None
    return new.id


def test_a_card_whose_answer_was_lost_is_taken_over_by_the_reopened_incident(
        ground: Ground) -> None:
    ground.standin.lose_response("chat.postMessage")
    outage_after_first_post(ground)
    firing(ground, "lost-answer")
    old = ground.wait_incident(lambda i: True, 30, "the alert's incident").id
    # the card is in the channel, tagged with the lost incident's outbox key
    assert wait_until(lambda: ground.parents(), 30), ground.logs()
    (card,) = ground.parents()
    assert card["metadata"]["event_payload"]["key"].startswith(f"{old}/"), card
    new_id = wiped_and_reopened(ground, old)
    # Slack answers again: the re-opened incident finds the card and edits it
    assert wait_until(lambda: ground.settled(new_id)
                      and ground.card_shows(new_id, f"incident {new_id}")
                      and ground.card_shows(new_id, '"approve'), DIAGNOSIS_S + 20), ground.logs()
    new = ground.get(new_id)
    assert new is not None and new.chat is not None
    assert new.chat.ts == card["ts"], (new.chat, card["ts"])
    (only,) = for_the_alert(ground)  # one message for the alert: the first, edited
    assert only["ts"] == card["ts"]
    assert f"incident {new_id}" in json.dumps(only) and old not in json.dumps(only["blocks"])
    assert wait_until(lambda: len(ground.parents()) == 2, 15)  # and the announcement
    # its buttons are the re-opened incident's: Approve names its approval, and acts
    approve = ground.card(new_id)
    values = [el.get("value") for b in approve.get("blocks") or []
              for el in b.get("elements", []) if el.get("type") == "button"]
    assert {p.approval_id for p in new.plans} <= set(values), (new.plans, values)
    assert ground.click(approve, "approve").status_code == 200
    assert wait_until(lambda: (i := ground.get(new_id)) is not None
                      and i.state is S.VERIFIED, 45), ground.logs()
    assert not ground.standin.calls_of("chat.postMessage")[1:] or all(
        c.params.get("thread_ts") or HEAD in json.dumps(c.params)
        for c in ground.standin.calls_of("chat.postMessage")[1:]), "no second card"
    audit = [e.action for e in ground.store.audit.timeline(new_id)]
    assert "incident.recovered" in audit and "chat.card_taken_over" in audit, audit


def test_with_no_card_in_the_channel_the_reopened_incident_posts_its_own(
        ground: Ground) -> None:
    """The lost card's post never reached Slack (500s from the first try on): the re-opened
    incident looks, finds nothing, and posts its card as before."""
    ground.standin.outage(OUTAGE_S)
    firing(ground, "never-posted")
    old = ground.wait_incident(lambda i: True, 30, "the alert's incident").id
    assert wait_until(lambda: ground.standin.calls_of("chat.postMessage"), 30)
    assert ground.parents() == []
    new_id = wiped_and_reopened(ground, old)
    assert wait_until(lambda: ground.settled(new_id)
                      and ground.card_shows(new_id, f"incident {new_id}"),
                      DIAGNOSIS_S + 20), ground.logs()
    new = ground.get(new_id)
    assert new is not None and new.chat is not None
    (only,) = for_the_alert(ground)
    assert only["ts"] == new.chat.ts
    assert only["metadata"]["event_payload"]["key"].startswith(f"{new_id}/")
    # it looked before posting
    assert ground.standin.calls_of("conversations.history")
