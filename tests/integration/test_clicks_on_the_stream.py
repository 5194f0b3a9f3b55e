"""Clicks are events on the stream, as alerts are (issue 34), on a real redis-server: the
desk's claim queues its click event in the same script, the flow's consumer applies it,
and what only the flow knows reaches the clicker privately, in the words of
``bot.core.strings``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis import Redis

from bot.chat.base import ChatMessage, Ephemeral
from bot.chat.interactions import ApprovalDesk
from bot.chat.outbox import CARD
from bot.config.settings import Settings
from bot.core import strings
from bot.demo.story import make_desk
from bot.domain.approval import ApprovalAction, ApprovalPolicy, ClaimOutcome
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState as S
from bot.flow.assembly import Flow, build_flow
from bot.flow.consumer import GROUP
from bot.ssh.pool import ParamikoPool
from storage.chat_outbox import Op
from storage.stores import open_stores
from tests.fixtures.bots import settle
from tests.helpers.chat import RecordingChat
from tests.helpers.clicks import queued

ONCALL, CHANNEL = "UONCALL", "C0INCIDENTS"


@pytest.fixture
def flow(redis: Redis, redis_url: str) -> Iterator[tuple[Flow, RecordingChat]]:
    settings = Settings.model_validate({"redis_url": redis_url, "chat_backend": "terminal",
                                        "slack": {"approvers": [ONCALL], "channel": CHANNEL}})
    pool, chat = ParamikoPool(settings.ssh_defaults), RecordingChat()
    yield build_flow(settings, open_stores(redis_url), pool, chat), chat
    pool.close()


def opened(ctx: Flow) -> str:
    incident, created = ctx.incidents.open_or_fold(Alert(source="test", host="gpu-01",
                                                         kind="vram_idle"))
    assert created
    return incident.id


def test_an_incident_verb_is_queued_then_applied_and_answered_by_the_flow(
        flow: tuple[Flow, RecordingChat]) -> None:
    ctx, chat = flow
    incident_id = opened(ctx)
    desk = make_desk(ctx)
    assert desk.incident("ack", incident_id, ONCALL, channel="C0WHERE") == ""  # queued
    assert queued(ctx.events.redis) == [("click.ack", incident_id, ONCALL)]
    assert ctx.incidents.require(incident_id).acked_by == ""  # the desk changed nothing
    settle(ctx)
    assert ctx.incidents.require(incident_id).acked_by == ONCALL
    assert chat.ephemerals == [Ephemeral(ONCALL, strings.INCIDENT_ACKED.format(id=incident_id),
                                         "C0WHERE", {"incident_id": incident_id})]


def test_what_the_flow_refuses_and_an_unknown_incident_are_said_to_the_clicker(
        flow: tuple[Flow, RecordingChat]) -> None:
    ctx, chat = flow
    incident_id = opened(ctx)
    desk = make_desk(ctx)
    desk.incident("resolve", incident_id, ONCALL)
    desk.incident("snooze", incident_id, ONCALL, 3600)  # resolved by then: cannot
    desk.incident("ack", "INC-404", ONCALL)
    settle(ctx)
    assert ctx.incidents.require(incident_id).state is S.RESOLVED
    told = [(n.user, n.text, n.channel) for n in chat.ephemerals]
    assert told == [
        (ONCALL, strings.INCIDENT_RESOLVED.format(id=incident_id), CHANNEL),
        (ONCALL, strings.INCIDENT_CANNOT.format(id=incident_id, state="resolved",
                                                verb="snoozed"), CHANNEL),
        (ONCALL, strings.INCIDENT_UNKNOWN.format(id="INC-404"), CHANNEL)]


def test_a_refused_verb_queues_nothing(flow: tuple[Flow, RecordingChat]) -> None:
    ctx, _ = flow
    incident_id = opened(ctx)
    refused = make_desk(ctx).incident("resolve", incident_id, "UMALLORY")
    assert refused.startswith("You are not allowed to resolve")
    assert queued(ctx.events.redis) == []


def test_a_claimed_click_is_on_the_stream_with_its_claim_and_survives_its_consumer(
        flow: tuple[Flow, RecordingChat]) -> None:
    """The claim and its event are one script: once ``claim`` returned, the flow will see
    the click even if this process died right after, and a consumer that read it and died
    before its ack leaves it pending for another replica."""
    ctx, _ = flow
    incident_id = opened(ctx)
    approval = ctx.approvals.create(incident_id, ApprovalAction("systemd.stop_disable",
                                                                {"unit": "x.service"}, "a1"),
                                    evidence_hash="e", requested_by="bot",
                                    now=ctx.clock(), policy=ApprovalPolicy(frozenset({ONCALL})))
    desk = ApprovalDesk(ctx.approvals, ctx.policy, ctx.events)  # no flow, no audit: the store
    assert desk.approve(approval.id, ONCALL).outcome is ClaimOutcome.CLAIMED
    assert queued(ctx.events.redis) == [("click.approved", approval.id, ONCALL)]
    dead = ctx.consumer()
    ctx.events.ensure_group(GROUP)
    read = ctx.events.consume(GROUP, dead.name)  # read, never handled nor acked: it died
    assert [e["type"] for _, e in read] == ["incident.opened", "click.approved"]
    again = ctx.events.claim_stale(GROUP, "another-replica", 0)
    assert [e.get("approval_id") for _, e in again] == [None, approval.id]
    audited = [(e.actor, e.action) for e in ctx.audit.timeline(incident_id)]
    assert audited[-1] == (ONCALL, "approval.approved")  # written by the same script


def test_a_reply_said_again_under_its_purpose_edits_the_first(
        flow: tuple[Flow, RecordingChat]) -> None:
    """The denial's thread line names its approval as its purpose: a ``click.denied``
    delivered again (its consumer died before the ack) edits that line, never posts a
    second one (``ReplyInThread.purpose``, ``Publisher.reply``)."""
    ctx, chat = flow
    incident = ctx.incidents.require(opened(ctx))
    ctx.outbox.send(incident.id, CARD, Op.POST, ChatMessage(text="the card"), CHANNEL)
    for _ in range(2):
        ctx.publisher.reply(incident, "Denied by <@UONCALL>: x will not run.",
                            purpose="denied:a1")
    assert ctx.outbox.flush(10.0)
    replies = [text for _, message, thread, _ in chat.posts
               if thread is not None and (text := message.text).startswith("Denied")]
    assert replies == ["Denied by <@UONCALL>: x will not run."]
    assert [m.text for _, m in chat.updates if m.text.startswith("Denied")] == [
        "Denied by <@UONCALL>: x will not run."]
