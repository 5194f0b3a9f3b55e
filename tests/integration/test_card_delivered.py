"""A delivered card is the flow's event, not a write by the chat layer: through the
assembled flow (``build_flow``), a real redis-server and the Slack stand-in over HTTP, the
outbox only reports the delivery and ``FlowRunner.handle(CardDelivered)`` keeps the card's
place on the incident and attaches its approvals to that message, whichever retry
delivered it; an edit of the known card writes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from redis import Redis

from bot.chat.base import ChatMessage
from bot.chat.outbox import CARD
from bot.chat.slack import SlackBackend, make_client
from bot.domain.approval import ApprovalAction
from bot.domain.findings import ProposedAction
from bot.domain.incident import Alert
from bot.domain.incident_record import ActionPlan, ChatRefs
from bot.flow.assembly import Flow, build_flow
from bot.rig.slack_standin import SlackStandIn
from bot.ssh.pool import ParamikoPool
from storage import keys
from storage.chat_outbox import Op
from storage.stores import Stores
from tests.fixtures.slack import CHANNEL, slack_test_settings


@pytest.fixture
def flow(slack_standin: SlackStandIn, redis: Redis) -> Iterator[Flow]:
    settings = slack_test_settings(slack_standin)
    pool = ParamikoPool(settings.ssh_defaults)
    chat = SlackBackend(make_client(settings, timeout_s=2))
    yield build_flow(settings, Stores(redis, redis), pool, chat)
    pool.close()


def card(incident_id: str, text: str) -> ChatMessage:
    return ChatMessage(text=text, header=f"incident {incident_id}: {text}",
                       incident_id=incident_id)


def test_a_card_delivered_by_the_retry_is_kept_and_its_approvals_attached(
        flow: Flow, slack_standin: SlackStandIn, redis: Redis) -> None:
    incidents, approvals = flow.incidents, flow.approvals
    incident, _ = incidents.open_or_fold(Alert("alertmanager", "gpu-01", "vram_idle"))
    action = ProposedAction("a1", "systemd.stop_disable", {"unit": "vllm.service"}, "frees")
    approval = approvals.create(incident.id, ApprovalAction.of(action, ()), evidence_hash="e",
                                requested_by="alertmanager", now=time.time(),
                                policy=flow.policy)
    plan = ActionPlan(action, ("systemctl stop vllm.service",), approval.id)
    incidents.update(incident.id, lambda i: replace(i, plans=(plan,)))
    slack_standin.fail("chat.postMessage", times=1)
    assert flow.outbox.send(incident.id, CARD, Op.POST, card(incident.id, "v1"), CHANNEL) is None
    assert incidents.require(incident.id).chat is None, "not delivered, nothing to remember"
    assert flow.outbox.drain_once(time.time() + 60) == 1  # the retry, from the drain
    (posted,) = slack_standin.top_level(CHANNEL)
    kept = incidents.require(incident.id)
    assert kept.chat == ChatRefs(CHANNEL, posted["ts"], posted["ts"])
    stored = approvals.get(approval.id)
    assert stored is not None and stored.message_ts == posted["ts"]

    before = redis.hgetall(keys.incident(incident.id))
    assert flow.outbox.send(incident.id, CARD, Op.UPDATE, card(incident.id, "v2"),
                            CHANNEL) is not None
    assert slack_standin.calls_of("chat.update"), "the edit went out"
    assert redis.hgetall(keys.incident(incident.id)) == before, "an edit changes nothing"


def test_only_the_card_is_remembered_and_an_unknown_incident_is_left_alone(
        flow: Flow, slack_standin: SlackStandIn, redis: Redis) -> None:
    incident, _ = flow.incidents.open_or_fold(Alert("alertmanager", "gpu-02", "vram_idle"))
    ref = flow.outbox.send(incident.id, "evidence", Op.POST, card(incident.id, "ev"), CHANNEL)
    assert ref is not None and flow.incidents.require(incident.id).chat is None
    assert flow.outbox.send("999", CARD, Op.POST, card("999", "lost"), CHANNEL) is not None
    assert not redis.exists(keys.incident("999")), "no incident made up for a stray card"
