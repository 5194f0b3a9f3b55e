"""The durable chat outbox against a real redis-server and the Slack stand-in over HTTP:
an outage, a 429, a lost response and two concurrent senders each end with every item
delivered once, in order per incident, and the delay in the audit."""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from redis import Redis

from bot.chat.base import ChatMessage, MessageRef
from bot.chat.outbox import CARD, ChatOutbox, message_to_json
from bot.chat.slack import SlackBackend, make_client, shared_backend
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.slack_standin import Call, SlackStandIn
from storage.audit import AuditEntry, AuditLog
from storage.chat_outbox import ChatOutboxStore, NewItem, Op, OutboxItem, Posted
from storage.connection import StorageError, connect
from storage.renders import RenderLedger
from storage.slack_budget import BudgetSettings, SlackBudget, workspace_of
from storage.stores import Stores
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, slack_test_settings


def backend(standin: SlackStandIn) -> SlackBackend:
    return SlackBackend(make_client(slack_test_settings(standin), timeout_s=2))


def card(text: str) -> ChatMessage:
    return ChatMessage(text=text, header=f"incident 42: {text}", incident_id="42")


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline, tick = time.monotonic() + timeout_s, threading.Event()
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        tick.wait(0.05)


@contextmanager
def draining(outbox: ChatOutbox, idle_s: float = 0.2) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=outbox.run, args=(stop, idle_s), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def entries(redis: Redis, action: str, incident_id: str = "42") -> list[AuditEntry]:
    return [e for e in AuditLog(redis).timeline(incident_id) if e.action == action]


def test_slack_down_20s_then_one_card_and_its_edits_in_order(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    delivered: list[tuple[str, str, MessageRef]] = []
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin),
                        on_delivered=lambda i, p, r: delivered.append((i, p, r)))
    slack_standin.outage(20.0, status=500)
    back_at, back_mono = time.time() + 20.0, time.monotonic() + 20.0
    # the flow re-publishes while the card is not posted yet: each is a "post" of the card
    assert outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL) is None
    assert outbox.send("42", CARD, Op.POST, card("v2"), CHANNEL) is None
    assert outbox.send("42", "evidence", Op.POST, ChatMessage(text="per-GPU table"), CHANNEL,
                       thread_of=CARD) is None
    assert outbox.send("42", CARD, Op.POST, card("v3"), CHANNEL) is None
    with draining(outbox):
        wait_until(lambda: store.pending("42") == 0, 60, "the outbox to empty")
    cards = slack_standin.top_level(CHANNEL)
    assert len(cards) == 1 and cards[0]["text"] == "v3", "one card, showing the newest render"
    ts = cards[0]["ts"]
    (first_post,) = [c for c in slack_standin.calls_of("chat.postMessage")
                     if c.params.get("thread_ts") is None and c.at >= back_mono]
    assert first_post.params["text"] == "v1", "the first render is posted, then edited"
    # v2 is moot once v3 is queued: the card is edited once, to the newest render
    assert [c.params["text"] for c in _updates(slack_standin, ts)] == ["v3"]
    reply = [m for m in slack_standin.messages.values() if m.get("thread_ts") == ts]
    assert [m["text"] for m in reply] == ["per-GPU table"], "the evidence is in its thread"
    assert [(i, p) for i, p, _ in delivered] == [("42", CARD), ("42", "evidence"), ("42", CARD)]
    assert delivered[0][2] == MessageRef(CHANNEL, ts)
    late = entries(redis, "chat.delivered_late")
    assert len(late) == 3 and late[0].detail["seconds"] >= 19.0
    first_ok = min(e.ts for e in late)
    print(f"\ndelivery delay after recovery: {first_ok - back_at:.2f}s "
          f"(card {late[0].detail['seconds']}s after it was queued, "
          f"{late[0].detail['attempts']} attempts)")
    assert first_ok - back_at <= 5.5, "delivered within one capped backoff of recovery"
    # later edits go straight through, in order, as edits of that card
    assert outbox.send("42", CARD, Op.POST, card("v4"), CHANNEL) == MessageRef(CHANNEL, ts)
    assert outbox.send("42", CARD, Op.UPDATE, card("v5"), CHANNEL,
                       ref=MessageRef(CHANNEL, ts)) == MessageRef(CHANNEL, ts)
    assert [c.params["text"] for c in _updates(slack_standin, ts)] == ["v3", "v4", "v5"]
    assert len(slack_standin.top_level(CHANNEL)) == 1
    # only the head was tried while Slack was down: the items behind it waited their turn
    assert len(entries(redis, "chat.delivery_deferred")) == 1


def test_429_retry_after_is_honoured_not_slept_on(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin))
    slack_standin.rate_limit("chat.postMessage", times=1, retry_after=2)
    started = time.monotonic()
    assert outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL) is None
    assert time.monotonic() - started < 1.0, "send never sleeps on a 429"
    assert outbox.drain_once() == 0, "not due before Retry-After"
    with draining(outbox, idle_s=0.05):
        wait_until(lambda: store.pending("42") == 0, 10, "the card")
    first, second = slack_standin.calls_of("chat.postMessage")
    assert second.at - first.at >= 2.0
    assert len(slack_standin.top_level(CHANNEL)) == 1
    (late,) = entries(redis, "chat.delivered_late")
    assert late.detail["seconds"] >= 2.0 and late.detail["last_error"] == "ratelimited"


def test_a_lost_response_does_not_post_a_second_card(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    delivered: list[MessageRef] = []
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin), on_delivered=lambda i, p, r:
                        delivered.append(r), backoff_s=0.05)
    slack_standin.lose_response("chat.postMessage", 1)
    assert outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL) is None
    assert len(slack_standin.top_level(CHANNEL)) == 1, "Slack has the post; we lack its ts"
    with draining(outbox, idle_s=0.05):
        wait_until(lambda: store.pending("42") == 0, 10, "the retry")
    (posted,) = slack_standin.top_level(CHANNEL)
    assert delivered == [MessageRef(CHANNEL, posted["ts"])], "found, not posted again"
    assert len(slack_standin.calls_of("chat.postMessage")) == 1
    # a later render of the card edits that message
    assert outbox.send("42", CARD, Op.POST, card("v2"), CHANNEL) == MessageRef(
        CHANNEL, posted["ts"])
    assert [m["text"] for m in slack_standin.top_level(CHANNEL)] == ["v2"]


def test_a_lost_reply_is_found_in_its_thread_not_posted_twice(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin), backoff_s=0.05)
    card_ref = outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL)
    assert card_ref is not None
    slack_standin.lose_response("chat.postMessage", 1)
    assert outbox.send("42", "reply:1", Op.POST, ChatMessage(text="step 1 done"), CHANNEL,
                       thread_of=CARD) is None
    with draining(outbox, idle_s=0.05):
        wait_until(lambda: store.pending("42") == 0, 10, "the reply")
    replies = [m for m in slack_standin.messages.values() if m.get("thread_ts") == card_ref.ts]
    assert [m["text"] for m in replies] == ["step 1 done"]
    assert len(slack_standin.calls_of("conversations.replies")) == 1


def test_a_lookup_refused_for_good_posts_again_rather_than_lose_the_card(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin), backoff_s=0.05)
    slack_standin.fail("conversations.history", times=1, status=200, error="missing_scope")
    store.append("42", NewItem(Op.POST, CARD, _json("v1"), CHANNEL), time.time())
    item = store.claim("42", time.time(), "t")
    assert item is not None and store.release(item, time.time(), "TimeoutError", True)
    assert outbox.drain_once() == 1
    assert [m["text"] for m in slack_standin.top_level(CHANNEL)] == ["v1"]


def lost_cards(standin: SlackStandIn, redis: Redis) -> MessageRef:
    """INC-1's card reached Slack but its answer never came back, then Redis lost the
    outbox with the incident; INC-10's card, posted before it, carries a key that starts
    with INC-1 but for the ``/``."""
    outbox = ChatOutbox(ChatOutboxStore(redis), backend(standin))
    assert outbox.send("INC-10", CARD, Op.POST, card("INC-10 v1"), CHANNEL) is not None
    standin.lose_response("chat.postMessage", 1)
    assert outbox.send("INC-1", CARD, Op.POST, card("INC-1 v1"), CHANNEL) is None
    redis.flushdb()
    (lost,) = [m for m in standin.top_level(CHANNEL) if m["text"] == "INC-1 v1"]
    return MessageRef(CHANNEL, str(lost["ts"]))


def test_a_reopened_card_takes_over_the_lost_incidents_card_instead_of_posting(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    """Issue 39 (INC-5837): the re-opened incident's first card post finds the message
    the lost incident's outbox posted and edits it: delivered there, nothing posted."""
    delivered: list[tuple[str, str, MessageRef]] = []
    lost = lost_cards(slack_standin, redis)
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin), backoff_s=0.05,
                        on_delivered=lambda i, p, r: delivered.append((i, p, r)))
    posts = len(slack_standin.calls_of("chat.postMessage"))
    slack_standin.fail("conversations.history", times=1)  # Slack refusing for now: later
    assert outbox.send("INC-1001", CARD, Op.POST, card("INC-1001 v1"), CHANNEL,
                       look_for="INC-1", look_since=time.time() - 30) is None
    assert store.pending("INC-1001") == 1
    with draining(outbox, idle_s=0.05):
        wait_until(lambda: store.pending("INC-1001") == 0, 10, "the card")
    assert delivered == [("INC-1001", CARD, lost)]
    assert store.posted("INC-1001")[CARD] == Posted(CHANNEL, lost.ts, lost.ts)
    assert len(slack_standin.calls_of("chat.postMessage")) == posts, "nothing posted"
    assert [c.params["text"] for c in _updates(slack_standin, lost.ts)] == ["INC-1001 v1"]
    assert sorted(m["text"] for m in slack_standin.top_level(CHANNEL)) == [
        "INC-10 v1", "INC-1001 v1"]
    (taken,) = entries(redis, "chat.card_taken_over", "INC-1001")
    assert taken.detail["was"] == "INC-1" and taken.detail["ts"] == lost.ts
    # the card's later renders edit it, as any card's
    assert outbox.send("INC-1001", CARD, Op.POST, card("INC-1001 v2"), CHANNEL) == lost


def test_a_second_loss_before_the_taken_over_card_is_recorded_still_finds_it(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    """The take-over retags the message with the re-opened incident's key: Redis lost
    again before INC-1001's card was recorded, its own re-open (INC-2001) looks for
    INC-1001's key and finds the same message, not post a second."""
    lost = lost_cards(slack_standin, redis)
    outbox = ChatOutbox(ChatOutboxStore(redis), backend(slack_standin))
    assert outbox.send("INC-1001", CARD, Op.POST, card("INC-1001 v1"), CHANNEL,
                       look_for="INC-1", look_since=time.time() - 30) == lost
    meta = slack_standin.messages[(CHANNEL, lost.ts)]["metadata"]
    assert meta["event_payload"]["key"].startswith("INC-1001/")
    redis.flushdb()
    posts = len(slack_standin.calls_of("chat.postMessage"))
    assert outbox.send("INC-2001", CARD, Op.POST, card("INC-2001 v1"), CHANNEL,
                       look_for="INC-1001", look_since=time.time() - 30) == lost
    assert len(slack_standin.calls_of("chat.postMessage")) == posts, "nothing posted"
    assert [m["text"] for m in slack_standin.top_level(CHANNEL)
            if m["text"].startswith("INC-")] == ["INC-10 v1", "INC-2001 v1"]


def test_the_lost_card_is_found_under_pages_of_later_messages(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    """A busy channel: 450 messages came after the lost card, more than one page of
    ``conversations.history``. The lookup follows Slack's cursor to it, not post again."""
    lost = lost_cards(slack_standin, redis)
    client = make_client(slack_test_settings(slack_standin), timeout_s=2)
    for n in range(450):
        client.chat_postMessage(channel=CHANNEL, text=f"chatter {n}")
    outbox = ChatOutbox(ChatOutboxStore(redis), backend(slack_standin))
    posts = len(slack_standin.calls_of("chat.postMessage"))
    assert outbox.send("INC-1004", CARD, Op.POST, card("INC-1004 v1"), CHANNEL,
                       look_for="INC-1", look_since=time.time() - 30) == lost
    assert len(slack_standin.calls_of("chat.postMessage")) == posts, "nothing posted"
    pages = slack_standin.calls_of("conversations.history")
    cursors = [c.params.get("cursor") for c in pages]
    assert len(cursors) == 3 and cursors[0] is None and all(cursors[1:])
    # a post's own key (the look after a timeout) is on the newest page: one call, not 3
    newest = outbox.send("INC-1005", CARD, Op.POST, card("INC-1005 v1"), CHANNEL)
    assert backend(slack_standin).find_posted(CHANNEL, None, "INC-1005/1",
                                              time.time() - 30) == newest
    assert len(slack_standin.calls_of("conversations.history")) == 4


def test_with_nothing_to_take_over_the_reopened_card_is_posted(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    """No message of the lost incident in the channel (its post never reached Slack), or
    the channel cannot be read at all: the card is posted, as any first card."""
    outbox = ChatOutbox(ChatOutboxStore(redis), backend(slack_standin))
    ref = outbox.send("INC-1002", CARD, Op.POST, card("INC-1002 v1"), CHANNEL,
                      look_for="INC-2", look_since=time.time() - 30)
    assert ref is not None and [m["ts"] for m in slack_standin.top_level(CHANNEL)] == [ref.ts]
    assert len(slack_standin.calls_of("conversations.history")) == 1
    slack_standin.fail("conversations.history", times=1, status=200, error="missing_scope")
    other = outbox.send("INC-1003", CARD, Op.POST, card("INC-1003 v1"), CHANNEL,
                        look_for="INC-3", look_since=time.time() - 30)
    assert other is not None and len(slack_standin.top_level(CHANNEL)) == 2


def test_two_senders_draining_together_send_each_item_once_in_order(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    one = ChatOutbox(store, backend(slack_standin))
    two = ChatOutbox(ChatOutboxStore(Redis(connection_pool=redis.connection_pool)),
                     backend(slack_standin))
    now = time.time()
    texts = {f"I{i}": [f"I{i} item {n}" for n in range(8)] for i in range(6)}
    for iid, items in texts.items():
        for n, text in enumerate(items):
            store.append(iid, NewItem(Op.POST, f"reply:{n}", _json(text), CHANNEL), now)
    go = threading.Barrier(2)
    sent = [0, 0]

    def drain(k: int, outbox: ChatOutbox) -> None:
        go.wait()
        while any(store.pending(i) for i in texts):
            sent[k] += outbox.drain_once()

    threads = [threading.Thread(target=drain, args=(k, o)) for k, o in enumerate((one, two))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    posted = [c.params["text"] for c in slack_standin.calls_of("chat.postMessage")]
    assert sorted(posted) == sorted(t for items in texts.values() for t in items), "once each"
    assert sum(sent) == 48
    for items in texts.values():
        assert [p for p in posted if p.split(" ")[0] == items[0].split(" ")[0]] == items


def test_a_dead_senders_claim_expires_and_is_taken_again(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis, lease_s=30)
    now = time.time()
    store.append("42", NewItem(Op.POST, CARD, _json("v1"), CHANNEL), now)
    dead = store.claim("42", now, store.new_token())  # claimed, then its process died
    assert dead is not None and dead.attempts == 1
    outbox = ChatOutbox(store, backend(slack_standin))
    assert outbox.drain_once(now + 29) == 0, "a live claim is respected"
    assert slack_standin.calls_of("chat.postMessage") == []
    assert outbox.drain_once(now + 31) == 1
    assert not store.ack(dead, _posted(), None, now), "the dead claim cannot ack any more"
    assert len(slack_standin.top_level(CHANNEL)) == 1
    # its try may have reached Slack: the channel was looked at before posting
    assert len(slack_standin.calls_of("conversations.history")) == 1


def test_a_sender_killed_after_posting_leaves_no_duplicate(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis, lease_s=30)
    chat = backend(slack_standin)
    now = time.time()
    store.append("42", NewItem(Op.POST, CARD, _json("v1"), CHANNEL), now)
    dead = store.claim("42", now, store.new_token())
    assert dead is not None
    chat.post_once(CHANNEL, card("v1"), None, dead.key)  # posted, then killed before the ack
    assert ChatOutbox(store, chat).drain_once(now + 31) == 1
    assert len(slack_standin.top_level(CHANNEL)) == 1
    assert store.posted("42")[CARD].ts == slack_standin.top_level(CHANNEL)[0]["ts"]


def test_a_waiting_head_blocks_later_items_of_its_incident_only(redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    now = 1000.0
    for iid in ("A", "B"):
        store.append(iid, NewItem(Op.POST, CARD, _json(f"{iid} card"), CHANNEL), now)
        store.append(iid, NewItem(Op.UPDATE, CARD, _json(f"{iid} edit"), CHANNEL), now)
    head = store.claim("A", now, "t1")
    assert head is not None and head.seq == 1
    assert store.claim("A", now, "t2") is None, "a claimed head is not taken twice"
    assert store.release(head, now + 5, "HTTP 500", False)
    assert store.claim("A", now + 1, "t2") is None, "its edit waits behind the delayed head"
    assert store.due_incidents(now + 1) == ["B"]
    assert store.claim("A", now + 5, "t2") is not None


def test_a_permanent_refusal_is_given_up_audited_and_the_queue_moves_on(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin))
    slack_standin.fail("chat.postMessage", times=1, status=200, error="invalid_blocks")
    assert outbox.send("42", CARD, Op.POST, card("bad"), CHANNEL) is None
    (failed,) = entries(redis, "chat.delivery_failed")
    assert failed.detail["error"] == "invalid_blocks" and len(failed.detail["error_id"]) == 12
    assert store.pending("42") == 0
    assert outbox.send("42", CARD, Op.POST, card("good"), CHANNEL) is not None


def test_refused_connections_wait_and_deliver_when_slack_listens_again(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    outbox = ChatOutbox(store, backend(slack_standin), backoff_s=0.05, max_backoff_s=0.2)
    slack_standin.refuse_connections()
    assert outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL) is None
    (deferred,) = entries(redis, "chat.delivery_deferred")
    assert "Connection refused" in deferred.detail["error"]
    slack_standin.reopen()
    with draining(outbox, idle_s=0.05):
        wait_until(lambda: store.pending("42") == 0, 10, "the card")
    assert [m["text"] for m in slack_standin.top_level(CHANNEL)] == ["v1"]


def test_an_edit_a_newer_one_replaces_is_dropped_but_never_a_first_post(redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    now = 1000.0
    for text in ("v1", "v2", "v3"):
        store.append("42", NewItem(Op.POST, CARD, _json(text), CHANNEL), now)
    first = store.claim("42", now, "t")
    assert first is not None and first.seq == 1, "the first post is never skipped"
    assert store.ack(first, _posted(), None, now)
    newest = store.claim("42", now, "t")
    assert newest is not None and newest.seq == 3 and store.pending("42") == 1
    assert store.release(newest, now, "TimeoutError", True)  # it may have reached Slack
    store.append("42", NewItem(Op.UPDATE, CARD, _json("v4"), CHANNEL), now)
    again = store.claim("42", now, "t")
    assert again is not None and again.seq == 3, "an uncertain try is tried again, not skipped"


def test_the_shared_budget_spaces_posts_without_audit_noise(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    budget = SlackBudget(redis, workspace_of(BOT_TOKEN), BudgetSettings(post_interval_s=1.0))
    store = ChatOutboxStore(redis)
    chat = SlackBackend(make_client(slack_test_settings(slack_standin), timeout_s=2),
                        budget=budget)
    outbox = ChatOutbox(store, chat)
    assert outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL) is not None
    # a second post in the channel within the second: the budget defers it, nobody sleeps
    assert outbox.send("42", "evidence", Op.POST, ChatMessage(text="table"), CHANNEL,
                       thread_of=CARD) is None
    assert outbox.flush(0.0) is False, "the evidence waits for the budget"
    assert outbox.flush(10.0) and store.pending("42") == 0
    first, second = slack_standin.calls_of("chat.postMessage")
    assert second.at - first.at >= 0.9
    assert AuditLog(redis).timeline("42") == [], "spacing is not a refusal: no audit entries"


def test_an_item_appends_in_the_callers_transaction(redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    with redis.pipeline(transaction=True) as pipe:
        pipe.hset("ib:test:incident", "state", "diagnosing")
        store.append_to(pipe, "42", NewItem(Op.POST, CARD, _json("v1"), CHANNEL), 1000.0)
        pipe.execute()
    assert store.pending_items("42") == [(1, "post", CARD, 0)]
    assert store.due_incidents(1000.0) == ["42"]


def test_a_render_that_lost_the_race_never_overwrites_a_newer_one(redis: Redis) -> None:
    store = ChatOutboxStore(redis)
    now = 1000.0

    def render(version: int) -> NewItem:
        return NewItem(Op.POST, CARD, _json(f"render {version}"), CHANNEL, version=version)

    store.append("42", render(1), now)
    first = store.claim("42", now, "t")
    assert first is not None and store.ack(first, _posted(), None, now)
    store.append("42", render(6), now)  # replica B took 6 after A took 5, and came first
    store.append("42", render(5), now)
    sent = store.claim("42", now, "t")
    assert sent is not None and sent.seq == 2
    assert store.ack(sent, _posted(), None, now)
    assert store.claim("42", now, "t") is None and store.pending("42") == 0, "5 was moot"
    store.append("42", render(4), now)  # later still, with the queue empty
    assert store.claim("42", now, "t") is None and store.pending("42") == 0
    store.append("42", render(7), now)
    newer = store.claim("42", now, "t")
    assert newer is not None and newer.seq == 5


def test_an_item_that_cannot_be_read_is_given_up_after_a_few_tries(redis: Redis) -> None:
    store, clock = ChatOutboxStore(redis), [1000.0]
    outbox = ChatOutbox(store, _NeverCalled(), clock=lambda: clock[0])
    store.append("42", NewItem(Op.POST, CARD, "not json", CHANNEL), clock[0])
    for _ in range(5):
        assert outbox.drain_once() == 0
        clock[0] += 60
    assert store.pending("42") == 0
    (failed,) = entries(redis, "chat.delivery_failed")
    assert failed.detail["attempts"] == 5 and "JSONDecodeError" in failed.detail["error"]


class _NeverCalled:
    def post(self, channel: str, message: ChatMessage, thread: MessageRef | None = None,
             ) -> MessageRef:
        raise AssertionError("an unreadable item reached the backend")

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        raise AssertionError("an unreadable item reached the backend")

    def ephemeral(self, note: object) -> None:
        raise AssertionError("unused")

    def upload(self, ref: MessageRef, path: object, title: str) -> None:
        raise AssertionError("unused")


def test_outbox_sends_advance_the_render_ledger_the_other_path_reads(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    chat = shared_backend(make_client(slack_test_settings(slack_standin), timeout_s=2),
                          Stores(redis, redis))
    outbox = ChatOutbox(ChatOutboxStore(redis), chat)
    ref = outbox.send("42", CARD, Op.POST, replace(card("v3"), seq=3), CHANNEL)
    assert ref is not None and RenderLedger(redis).applied("42") == 3
    chat.update_once(ref, replace(card("v2"), seq=2))  # an older render, sent another way
    assert slack_standin.calls_of("chat.update") == []
    outbox.send("42", CARD, Op.UPDATE, replace(card("v4"), seq=4), CHANNEL, ref=ref)
    assert RenderLedger(redis).applied("42") == 4
    assert [m["text"] for m in slack_standin.top_level(CHANNEL)] == ["v4"]


def _updates(standin: SlackStandIn, ts: str) -> list[Call]:
    return [c for c in standin.calls_of("chat.update") if c.params.get("ts") == ts]


def _json(text: str) -> str:
    return message_to_json(ChatMessage(text=text))


def _posted() -> Posted:
    return Posted(CHANNEL, "1.000001", "1.000001")


class _RedisDiesAfterPosting:
    """Slack takes the post; Redis is SIGKILLed before the outbox can record it."""

    def __init__(self, chat: SlackBackend, server: LocalRedis) -> None:
        self.chat, self.server, self.armed = chat, server, True

    def post_once(self, channel: str, message: ChatMessage, thread: MessageRef | None,
                  key: str) -> MessageRef:
        ref = self.chat.post_once(channel, message, thread, key)
        if self.armed:
            self.armed = False
            self.server.kill()
        return ref

    def __getattr__(self, name: str) -> object:
        return getattr(self.chat, name)


def test_redis_killed_mid_send_gives_the_claim_back_not_a_lease_later(
        slack_standin: SlackStandIn, tmp_path: Path) -> None:
    """The claim survives in the AOF; the sender that held it gives it back as soon as
    Redis answers (uncertain: it finds its post instead of posting again), so the card's
    ack waits for Redis, not for the 30 s lease."""
    server = start_local_redis(tmp_path / "redis")
    try:
        store = ChatOutboxStore(connect(server.url), lease_s=30)
        chat = _RedisDiesAfterPosting(backend(slack_standin), server)
        outbox = ChatOutbox(store, chat)  # type: ignore[arg-type]
        now = time.time()
        with pytest.raises(StorageError):
            outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL)
        server.start()
        assert outbox.drain_once(now + 1) == 1  # well inside the lease
        assert len(slack_standin.top_level(CHANNEL)) == 1
        assert store.posted("42")[CARD].ts == slack_standin.top_level(CHANNEL)[0]["ts"]
    finally:
        server.stop()


class _ClaimAnswerLost(ChatOutboxStore):
    """The claim runs on the server, then the connection drops before its answer."""

    lose_next = True

    def claim(self, incident_id: str, now: float, token: str,
              expect_seq: int | None = None) -> OutboxItem | None:
        got = super().claim(incident_id, now, token, expect_seq)
        if self.lose_next:
            self.lose_next = False
            raise StorageError("Connection closed by server.")
        return got


def test_a_claim_whose_answer_was_lost_is_given_back_by_its_sender(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    """The sender knows the token it sent: the item is due again on its next pass, not
    when the 30 s lease runs out (a Redis restart mid-claim kept the card 27 s away)."""
    store = _ClaimAnswerLost(redis, lease_s=30)
    outbox = ChatOutbox(store, backend(slack_standin))
    now = time.time()
    with pytest.raises(StorageError):
        outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL)
    assert store.claim("42", now + 1, store.new_token()) is None  # held, by the lost claim
    assert outbox.drain_once(now + 1) == 1
    assert len(slack_standin.top_level(CHANNEL)) == 1


def test_a_claim_of_a_dead_sender_on_this_machine_is_taken_back_at_once(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    """A ``serve`` killed mid-send leaves its claim; the next ``serve`` here takes it back
    when its loop starts, not 30 s later. A live sender's claim is left alone."""
    store = ChatOutboxStore(redis, lease_s=30)
    now = time.time()
    store.append("42", NewItem(Op.POST, CARD, _json("v1"), CHANNEL), now)
    store.append("43", NewItem(Op.POST, CARD, _json("v1"), CHANNEL), now)
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    dead_token = f"{socket.gethostname()}:{int(gone.stdout)}:feedface"
    assert store.claim("42", now, dead_token) is not None
    assert store.claim("43", now, store.new_token()) is not None  # this process: alive
    assert store.reclaim_dead(now + 1) == 1
    assert ChatOutbox(store, backend(slack_standin)).drain_once(now + 1) == 1
    assert [m["text"] for m in slack_standin.top_level(CHANNEL)] == ["v1"]


def test_a_delivery_whose_record_redis_refuses_is_said_and_told_again(
        slack_standin: SlackStandIn, redis: Redis, caplog: pytest.LogCaptureFixture) -> None:
    """Chaos seed 500: Redis out of memory as a card went out. The card is in Slack; the
    write that records where is refused: a warning and a counted refusal, not an error,
    and the record is told again on each pass until Redis takes it (never sent twice)."""
    from redis.exceptions import OutOfMemoryError

    told: list[tuple[str, str, MessageRef]] = []
    refusing = [True]

    def record(incident_id: str, purpose: str, ref: MessageRef) -> None:
        if refusing[0]:
            raise OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
        told.append((incident_id, purpose, ref))

    outbox = ChatOutbox(ChatOutboxStore(redis), backend(slack_standin), on_delivered=record)
    with caplog.at_level(logging.WARNING):
        ref = outbox.send("42", CARD, Op.POST, card("v1"), CHANNEL)
        outbox.drain_once()  # Redis still refusing: kept, not lost, nothing sent again
    (posted,) = slack_standin.top_level(CHANNEL)
    assert ref == MessageRef(CHANNEL, posted["ts"]) and told == []
    said = [r for r in caplog.records if "Redis refused recording where (oom)" in r.getMessage()]
    assert len(said) == 2 and said[0].levelno == logging.WARNING
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    refusing[0] = False  # Redis takes writes again: the next pass records where it went
    assert outbox.drain_once() == 0 and told == [("42", CARD, ref)]
    outbox.drain_once()
    assert told == [("42", CARD, ref)] and len(slack_standin.top_level(CHANNEL)) == 1
    assert ChatOutboxStore(redis).untold() == []


def test_a_delivery_its_killed_sender_never_told_is_told_by_another(
        slack_standin: SlackStandIn, redis: Redis) -> None:
    """Chaos seed 4242 at 392748c (INC-5924): a replica delivered a card while Redis was
    out of memory, the write that records where was refused, and the replica was killed
    before its next pass: the incident never learnt its card, and its buttons never
    answered. The ack keeps the delivery in Redis until it is told; another sender's (or
    the restarted one's) first pass tells it, once."""
    from redis.exceptions import OutOfMemoryError

    def refused(incident_id: str, purpose: str, ref: MessageRef) -> None:
        raise OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")

    dead = ChatOutbox(ChatOutboxStore(redis), backend(slack_standin), on_delivered=refused)
    ref = dead.send("42", CARD, Op.POST, card("v1"), CHANNEL)
    assert ref is not None
    del dead  # killed: whatever it kept in memory is gone
    told: list[tuple[str, str, MessageRef]] = []
    other = ChatOutbox(ChatOutboxStore(redis), backend(slack_standin),
                       on_delivered=lambda i, p, r: told.append((i, p, r)))
    assert other.drain_once() == 0 and told == [("42", CARD, ref)]
    assert ChatOutboxStore(redis).untold() == []
    other.drain_once()
    assert told == [("42", CARD, ref)] and len(slack_standin.top_level(CHANNEL)) == 1
