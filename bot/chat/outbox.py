"""Chat delivery through the durable outbox (``storage/chat_outbox.py``): nothing is lost
when Slack refuses for a while, nothing is sent twice, and each incident's items keep order.
When Slack's pace is the limit, incidents' first messages go before thread replies.

``send`` queues the item and tries it at once, so a healthy Slack sees today's latency;
when Slack refuses (5xx, 429, a timeout, a refused connection) the item waits in Redis
with a due time and ``drain_once`` (a thread, any replica) delivers it later. A permanent
refusal (``channel_not_found``, ``invalid_blocks`` …) is given up with an audit entry and
a log line carrying an error id. A delivery after a delay is audited with the delay.

Duplicates: a retried ``post`` whose purpose already has a ``ts`` is sent as an edit of
that message; a post whose last try timed out (it may have reached Slack) is first looked
up by the key it carries in its metadata. A re-opened incident's card after a data loss
(``look_for``) is first looked up by the lost incident's keys: its card may be in the
channel though no record kept its ``ts`` (issue 39), and it is edited, not posted again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Protocol, runtime_checkable

from bot.chat.base import (
    Button,
    ButtonStyle,
    ChatBackend,
    ChatMessage,
    ChatSendError,
    MessageRef,
    Section,
)
from bot.core import metrics
from bot.core.heartbeat import Heartbeats
from bot.domain.backoff import Backoff
from storage.chat_outbox import (
    AuditNote,
    ChatOutboxStore,
    NewItem,
    Op,
    OutboxItem,
    Posted,
    Untold,
    key_prefix,
)
from storage.connection import StorageError, refusal

log = logging.getLogger(__name__)

# incident id, purpose, where it is now: the delivery report (the flow makes the card's
# a ``CardDelivered`` event, ``bot/flow/delivery.py``; the chat layer writes no incident)
Delivered = Callable[[str, str, MessageRef], None]
# incident id → (outbox id, purpose) of the message whose thread its card goes in (a
# storm's table, issue 37), or None: its own message (or its group parent's thread)
Placement = Callable[[str], tuple[str, str] | None]
UNKNOWN_TRIES = 5  # an unexpected error (not Slack's refusal) is tried this often, then dropped
LOOP = "outbox"  # its name in ``Heartbeats``
UNTOLD_LOOK_S = 5.0  # how often a sender looks for deliveries nobody told (a dead sender's)
CARD = "incident-card"  # the purpose of the incident's own message (posted once, then edited)
STORM_TABLE = "storm-table"  # the purpose of a storm's message (issue 37)


@runtime_checkable
class DirectChat(Protocol):
    """One attempt per call, never sleeping; a refusal raises ``ChatSendError``
    (``bot.chat.slack.SlackBackend`` is one)."""

    def post_once(self, channel: str, message: ChatMessage, thread: MessageRef | None,
                  key: str) -> MessageRef: ...

    def update_once(self, ref: MessageRef, message: ChatMessage, *,
                    urgent: bool = False, key: str = "") -> None: ...

    def find_posted(self, channel: str, thread: MessageRef | None, key: str,
                    oldest: float, *, prefix: bool = False) -> MessageRef | None: ...


class _Plain:
    """A backend without one-attempt calls (the terminal): any failure is transient."""

    def __init__(self, backend: ChatBackend) -> None:
        self.backend = backend

    def post_once(self, channel: str, message: ChatMessage, thread: MessageRef | None,
                  key: str) -> MessageRef:
        try:
            return self.backend.post(channel, message, thread=thread)
        except Exception as exc:
            raise ChatSendError(f"{type(exc).__name__}: {exc}", transient=True) from exc

    def update_once(self, ref: MessageRef, message: ChatMessage, *,
                    urgent: bool = False, key: str = "") -> None:
        try:
            self.backend.update(ref, message)
        except Exception as exc:
            raise ChatSendError(f"{type(exc).__name__}: {exc}", transient=True) from exc

    def find_posted(self, channel: str, thread: MessageRef | None, key: str,
                    oldest: float, *, prefix: bool = False) -> MessageRef | None:
        return None


class ChatOutbox:
    def __init__(
        self,
        store: ChatOutboxStore,
        backend: ChatBackend,
        clock: Callable[[], float] = time.time,
        on_delivered: Delivered | None = None,
        *,
        backoff_s: float = 1.0,
        max_backoff_s: float = 5.0,
        late_after_s: float = 2.0,
        parents_first: bool = True,
        placement: Placement | None = None,
        post_spacing_s: float = 1.0,
    ) -> None:
        self.store, self.clock, self.on_delivered = store, clock, on_delivered
        self.placement = placement  # decided when the card is sent, not when it is queued
        # Slack's pace for posts in one channel: the n-th post a drain pass finds waiting
        # for its channel is due n of these later, not all at the next slot (issue 37)
        self.post_spacing_s = post_spacing_s
        self._queue_ahead: dict[str, int] | None = None  # per channel, during a drain pass
        self.direct: DirectChat = backend if isinstance(backend, DirectChat) else _Plain(backend)
        self.backoff = Backoff(backoff_s, max_backoff_s)  # the one rule: bot/domain/backoff.py
        self.late_after_s = late_after_s  # a shorter wait (budget spacing) is not audited
        # False: due items in due order only (before issue 29; ``bench/first_message.py``)
        self.parents_first = parents_first
        # (incident, token) of claims a Redis outage left this sender holding (mid-send, or
        # the claim's own answer lost): given back once Redis answers, not a lease later
        self._held: list[tuple[str, str]] = []
        self._held_lock = threading.Lock()
        # when to look next for deliveries nobody told ``on_delivered`` of (0: the next
        # pass): the store keeps them from the ack on, so a killed sender's are not lost
        self._untold_at = 0.0
        self._queued = threading.Event()  # an item queued without a try: the loop wakes

    def send(self, incident_id: str, purpose: str, op: Op | str, message: ChatMessage,
             channel: str, thread: MessageRef | None = None, ref: MessageRef | None = None,
             *, thread_of: str = "", deliver: bool = True,
             urgent: bool = False, look_for: str = "",
             look_since: float = 0.0) -> MessageRef | None:
        """Queue one post or edit and try it now: the ref when delivered now, None when
        it waits (Slack refused, or an earlier item of the incident is still waiting).
        ``message.seq`` (a render's number) orders renders of one purpose: an older one
        that arrives late is never sent over a newer one.
        ``thread_of`` names a purpose whose thread the reply goes to (resolved when sent,
        so a reply may be queued before the incident's card is delivered).
        Parents first: while some incident's first message is due and waiting (Slack's
        pace is the limit), a thread reply is left to the retry loop, which sends the
        waiting top-level posts before it (``ChatOutboxStore.due_incidents``); edits
        have their own budget and go at once.
        ``deliver`` False: only queued, for the retry loop to send (a caller that must
        not wait on Slack, like the flow's event loop).
        ``urgent``: listed with the first messages though it is an edit (a storm's table:
        the one message that shows a whole burst goes before anyone's own edits).
        ``look_for``: another incident whose top-level post (since ``look_since``) this
        top-level post takes over when Slack has one: edited, not posted again (the card
        of an incident Redis lost before its ts was recorded, issue 39)."""
        now = self.clock()
        item = NewItem(op=Op(op), purpose=purpose, message=message_to_json(message),
                       channel=ref.channel if ref is not None else channel,
                       thread_ts=thread.ts if thread is not None else "", thread_of=thread_of,
                       ref_ts=ref.ts if ref is not None else "", version=message.seq,
                       urgent=urgent, look_for=look_for, look_since=look_since)
        seq = self.store.append(incident_id, item, now)
        if not deliver:
            self._queued.set()
            return None
        self._give_back_held(now)
        if (self.parents_first and item.op is Op.POST and not is_top_level(item)
                and self.store.top_level_due(now + self.post_spacing_s)):
            # a first message (or a storm's table) waits for the channel's next slot: it
            # takes it, not this reply sent inline a moment before the retry loop wakes
            return None
        claimed = self._claim(incident_id, now, expect_seq=seq)
        return self._deliver(claimed) if claimed is not None else None

    def drain_once(self, now: float | None = None) -> int:
        """One pass of the retry loop: deliver every due head item, and the items behind
        it that are due too; the number delivered."""
        now = self.clock() if now is None else now
        delivered = 0
        self._give_back_held(now)
        self._record_again()
        self._queue_ahead = {}
        try:
            for incident_id in self.store.due_incidents(now, parents_first=self.parents_first):
                while (item := self._claim(incident_id, now)) is not None:
                    if self._deliver(item) is None:
                        break
                    delivered += 1
        finally:
            self._queue_ahead = None
        return delivered

    def run(self, stop: threading.Event, idle_s: float = 1.0,
            reclaim_every_s: float = 5.0, heartbeats: Heartbeats | None = None) -> None:
        """The retry loop for a thread: drain, then wait until the next item is due. At
        start and every ``reclaim_every_s``, claims of dead senders on this machine (a
        killed ``serve`` before this one) are taken back first. Each pass is a heartbeat
        (``LOOP``): ``/readyz`` says so when Redis refuses the loop for long."""
        reclaim_at = 0.0
        while not stop.is_set():
            try:
                if time.monotonic() >= reclaim_at:
                    self.store.reclaim_dead(self.clock())
                    reclaim_at = time.monotonic() + reclaim_every_s
                self.drain_once()
                nxt = self.store.next_due()
                if heartbeats is not None:
                    heartbeats.ok(LOOP)
            except StorageError as exc:  # Redis away: chat waits with it, nothing is lost
                why = refusal(exc) or "error"
                metrics.refused(why, LOOP)
                log.warning("chat outbox: storage unavailable (%s): %s", why, exc)
                if heartbeats is not None:
                    heartbeats.failed(LOOP, f"Redis refused: {why}")
                nxt = None
            wait = idle_s if nxt is None else min(idle_s, max(0.02, nxt - self.clock()))
            if self._queued.wait(wait):  # woken by a queued item (or ``stop``'s next look)
                self._queued.clear()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Deliver what can be delivered within ``timeout_s`` (shutdown, the demo, tests
        that read Slack): True when nothing is left waiting."""
        deadline, tick = time.monotonic() + timeout_s, threading.Event()
        while True:
            self.drain_once()
            nxt = self.store.next_due()
            left = deadline - time.monotonic()
            if nxt is None or left <= 0:
                return nxt is None
            tick.wait(min(left, max(0.02, nxt - self.clock())))

    def posted(self, incident_id: str, purpose: str) -> Posted | None:
        """Where a purpose's message was delivered (channel, ts, the thread it sits in)."""
        return self.store.posted(incident_id).get(purpose)

    # --- one attempt ---------------------------------------------------------------------
    def _give_back_held(self, now: float) -> None:
        """Release the claims a Redis outage left this sender holding, so their items are
        due again at once instead of a lease later (the AOF kept the claims). Released as
        uncertain: the post may have gone out, so the next try looks for it first."""
        with self._held_lock:
            held, self._held = self._held, []
        for n, (incident_id, token) in enumerate(held):
            try:
                self.store.unclaim(incident_id, token, now, "storage unavailable mid-send")
            except StorageError:
                with self._held_lock:
                    self._held.extend(held[n:])
                raise

    def _claim(self, incident_id: str, now: float, expect_seq: int | None = None
               ) -> OutboxItem | None:
        """``store.claim`` with a token this sender remembers when Redis does not answer:
        the claim may have been taken before the connection dropped."""
        token = _token()
        try:
            return self.store.claim(incident_id, now, token, expect_seq=expect_seq)
        except StorageError:
            self._hold(incident_id, token)
            raise

    def _hold(self, incident_id: str, token: str) -> None:
        with self._held_lock:
            self._held.append((incident_id, token))

    def _deliver(self, item: OutboxItem) -> MessageRef | None:
        try:
            return self._deliver_claimed(item)
        except StorageError:  # Redis away mid-send: the claim is given back when it answers
            self._hold(item.incident_id, item.token)
            raise

    def _deliver_claimed(self, item: OutboxItem) -> MessageRef | None:
        try:
            ref, thread_ts, taken = self._attempt(item)
        except ChatSendError as exc:
            self._failed(item, exc)
            return None
        except StorageError:
            raise  # Redis away: ``_deliver`` keeps the claim to give back
        except Exception as exc:  # a bug or an unknown failure: a few more tries, then give up
            error_id = uuid.uuid4().hex[:12]
            log.error("chat outbox: error %s sending item %s", error_id, item.key, exc_info=exc)
            self._failed(item, ChatSendError(f"{type(exc).__name__} (error {error_id})",
                                             transient=item.attempts < UNKNOWN_TRIES))
            return None
        at = self.clock()
        late = at - item.created >= self.late_after_s or bool(item.last_error)
        note = AuditNote("chat.delivered_late", {
            "purpose": item.purpose, "op": item.op.value, "seconds": round(at - item.created, 3),
            "attempts": item.attempts, "last_error": item.last_error}) if late else None
        if taken:  # the timeline says which message it is, and whose it was
            note = AuditNote("chat.card_taken_over", {
                "purpose": item.purpose, "ts": ref.ts, "was": item.look_for,
                "seconds": round(at - item.created, 3), "attempts": item.attempts})
        metrics.CHAT_OUTBOX.labels(outcome="delivered_late" if late else "delivered").inc()
        if not self.store.ack(item, Posted(ref.channel, ref.ts, thread_ts), note, at,
                              tell=self.on_delivered is not None):
            log.warning("chat outbox: claim on %s was lost before its ack", item.key)
        self._record(Untold(item.incident_id, item.purpose, item.seq), ref)
        return ref

    def _record(self, delivery: Untold, ref: MessageRef) -> bool:
        """Tell ``on_delivered`` where the item went, then the store that it was told:
        False when Redis refused, and the delivery waits in the store to be told again."""
        if self.on_delivered is None:
            return True
        try:
            self.on_delivered(delivery.incident_id, delivery.purpose, ref)
        except Exception as exc:
            if (why := refusal(exc)) is not None:  # Redis said "not now": not our bug
                metrics.refused(why, LOOP)  # (chaos seed 500: OOM as a card went out)
                log.warning("chat outbox: %s/%s delivered, but Redis refused recording "
                            "where (%s); told again on the next pass: %s",
                            delivery.incident_id, delivery.purpose, why, exc)
                self._untold_at = 0.0
                return False
            error_id = uuid.uuid4().hex[:12]
            log.error("chat outbox: error %s in on_delivered for %s/%s", error_id,
                      delivery.incident_id, delivery.purpose, exc_info=exc)
        try:
            self.store.told(delivery.incident_id, delivery.purpose, delivery.seq)
        except StorageError as exc:  # told again on a later look: telling twice is harmless
            log.warning("chat outbox: %s/%s told, but Redis did not take it off the untold "
                        "set: %s", delivery.incident_id, delivery.purpose, exc)
        return True

    def _record_again(self) -> None:
        """The deliveries nobody told ``on_delivered`` of: Redis refused the telling's
        write, or the sender that delivered them was killed first and its memory went with
        it (chaos seed 4242 at 392748c, INC-5924: its card in Slack, the incident without
        it, no button to click). Looked for on the first pass, every ``UNTOLD_LOOK_S`` and
        on the pass after a refusal; each incident's in order, until Redis refuses again.
        Any replica may tell one: the flow takes the same place twice as once."""
        if self.on_delivered is None or time.monotonic() < self._untold_at:
            return
        self._untold_at = time.monotonic() + UNTOLD_LOOK_S
        for delivery in self.store.untold():
            where = self.store.posted(delivery.incident_id).get(delivery.purpose)
            if where is None:  # nothing to tell (dropped since): only forget it
                self.store.told(delivery.incident_id, delivery.purpose, delivery.seq)
            elif not self._record(delivery, MessageRef(where.channel, where.ts)):
                return

    def _attempt(self, item: OutboxItem) -> tuple[MessageRef, str, bool]:
        """Send the item once; where it now is, the thread it sits in, and whether it took
        over another incident's message (``look_for``)."""
        posted = self.store.posted(item.incident_id)
        message = message_from_json(item.message)
        known = posted.get(item.purpose)
        if item.op is Op.POST and known is None:
            thread = self._placed(item) or self._thread(item, posted)
            channel = thread.channel if thread is not None else item.channel
            found = self._find(item, channel, thread, item.key, item.created) \
                if item.uncertain else None
            if found is None and thread is None and item.look_for:
                lost = self._find(item, channel, None, key_prefix(item.look_for),
                                  item.look_since or item.created, prefix=True)
                if lost is not None:  # edited into this item's message: one message still
                    # retagged with this item's key: a second loss before its ts is
                    # recorded looks for this incident's key, and finds it
                    self.direct.update_once(lost, message, key=item.key)
                    return lost, lost.ts, True
            ref = found or self.direct.post_once(channel, message, thread, item.key)
            return ref, thread.ts if thread is not None else ref.ts, False
        if item.ref_ts:
            target = MessageRef(item.channel, item.ref_ts)
        elif known is not None:
            target = MessageRef(known.channel, known.ts)
        else:
            raise ChatSendError(f"nothing posted yet for {item.purpose}", transient=False)
        if item.urgent:  # before every other edit for the workspace's update budget
            self.direct.update_once(target, message, urgent=True)
        else:
            self.direct.update_once(target, message)
        # the first edit of a message this incident did not post (taken over after a data
        # loss) records the thread it was told the message sits in, else its own
        return (target, known.thread_ts if known is not None else (item.thread_ts or target.ts),
                False)

    def _find(self, item: OutboxItem, channel: str, thread: MessageRef | None, key: str,
              oldest: float, *, prefix: bool = False) -> MessageRef | None:
        """The post an earlier try may have left (``key``), or the first post of a lost
        incident whose items' keys start with it (``prefix``). Slack refusing for now: the
        item is tried again later, the look first. When the channel cannot be read (a
        missing ``channels:history`` scope), post: a second card beats no card."""
        try:
            return self.direct.find_posted(channel, thread, key, oldest, prefix=prefix)
        except ChatSendError as exc:
            if exc.transient:
                raise
            log.warning("chat outbox: cannot look for %s before posting %s: %s",
                        key, item.key, exc.error)
            return None

    def _placed(self, item: OutboxItem) -> MessageRef | None:
        """The thread a card placed in a storm goes in: the storm's table. Asked when the
        card is sent, so a card queued before its storm began goes there too; until the
        table itself is out the card waits its turn (our spacing, not a refusal)."""
        where = self.placement(item.incident_id) if (
            self.placement is not None and item.purpose == CARD) else None
        if where is None:
            return None
        owner, purpose = where
        table = self.store.posted(owner).get(purpose)
        if table is None:
            raise ChatSendError(f"{owner} not posted yet", transient=True, retry_after_s=0.5,
                                throttled=True)
        return MessageRef(table.channel, table.ts)

    @staticmethod
    def _thread(item: OutboxItem, posted: dict[str, Posted]) -> MessageRef | None:
        if item.thread_ts:
            return MessageRef(item.channel, item.thread_ts)
        if not item.thread_of:
            return None
        parent = posted.get(item.thread_of)
        if parent is None:
            raise ChatSendError(f"nothing posted yet for {item.thread_of}", transient=False)
        return MessageRef(parent.channel, parent.thread_ts)

    def _failed(self, item: OutboxItem, exc: ChatSendError) -> None:
        now = self.clock()
        detail: dict[str, Any] = {"purpose": item.purpose, "op": item.op.value,
                                  "attempts": item.attempts, "error": exc.error}
        if not exc.transient:
            error_id = uuid.uuid4().hex[:12]
            log.error("chat outbox: gave up on %s (%s %s) after %d attempt(s): %s [error %s]",
                      item.key, item.op.value, item.purpose, item.attempts, exc.error, error_id)
            metrics.CHAT_OUTBOX.labels(outcome="given_up").inc()
            self.store.drop(item, AuditNote("chat.delivery_failed",
                                            {**detail, "error_id": error_id}), now)
            return
        wait = exc.retry_after_s if exc.retry_after_s is not None else self._backoff(item)
        wait += self._turn(item, exc)
        log.info("chat outbox: %s (%s %s) refused (%s); again in %.1fs", item.key,
                 item.op.value, item.purpose, exc.error, wait)
        metrics.CHAT_OUTBOX.labels(outcome="deferred").inc()
        note = (AuditNote("chat.delivery_deferred", {**detail, "retry_in_s": round(wait, 3)})
                if not exc.throttled and not item.last_error else None)  # its first refusal
        error = "" if exc.throttled else exc.error
        self.store.release(item, now + wait, error or item.last_error, exc.uncertain, note, now)

    def _turn(self, item: OutboxItem, exc: ChatSendError) -> float:
        """A post our own budget spaced out, in a drain pass: one more post is waiting for
        this channel ahead of the next one. Without this every waiting post was due again
        at the channel's next slot, one of them went and the rest were claimed and given
        back each second: 200 storm members meant ~1,000 Redis commands a second."""
        if self._queue_ahead is None or not exc.throttled or item.op is not Op.POST:
            return 0.0
        ahead = self._queue_ahead.get(item.channel, 0)
        self._queue_ahead[item.channel] = ahead + 1
        return ahead * self.post_spacing_s

    def _backoff(self, item: OutboxItem) -> float:
        return self.backoff.after(item.attempts)


def is_top_level(item: NewItem) -> bool:
    """A post that opens its own thread (an incident's message), not a reply or an edit."""
    return item.op is Op.POST and not item.thread_ts and not item.thread_of


def _token() -> str:
    """A fresh token per claim: an expired claim cannot ack, even from this process; it
    names this process (``ChatOutboxStore.reclaim_dead``)."""
    return ChatOutboxStore.new_token()


# --- the message as stored in the outbox --------------------------------------------------
def message_to_json(message: ChatMessage) -> str:
    return json.dumps(asdict(message), separators=(",", ":"))


def message_from_json(raw: str) -> ChatMessage:
    data = json.loads(raw)
    return ChatMessage(
        text=str(data["text"]), header=data.get("header"),
        sections=tuple(_section(s) for s in data.get("sections") or ()),
        buttons=tuple(_button(b) for b in data.get("buttons") or ()),
        context=tuple(str(c) for c in data.get("context") or ()),
        incident_id=str(data.get("incident_id") or ""), seq=int(data.get("seq") or 0))


def _section(data: dict[str, Any]) -> Section:
    accessory = data.get("accessory")
    return Section(text=str(data["text"]), fields=tuple(str(f) for f in data.get("fields") or ()),
                   code=data.get("code"),
                   buttons=tuple(_button(b) for b in data.get("buttons") or ()),
                   accessory=_button(accessory) if isinstance(accessory, dict) else None)


def _button(data: dict[str, Any]) -> Button:
    return Button(label=str(data["label"]), action_id=str(data["action_id"]),
                  value=str(data["value"]), style=ButtonStyle(data.get("style") or "default"),
                  confirm=data.get("confirm"), url=data.get("url"))
