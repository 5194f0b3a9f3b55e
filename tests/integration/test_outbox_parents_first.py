"""Parents before thread replies when Slack's pace is the limit (issue 29), against a real
redis-server: the outbox's due incidents list those whose head is a top-level post first,
and a reply queued while such a post waits is left for the retry loop, which sends the
parents before it. Each incident's own items keep their order."""

from __future__ import annotations

from redis import Redis

from bot.chat.base import ChatMessage, ChatSendError, MessageRef
from bot.chat.outbox import CARD, ChatOutbox, message_to_json
from storage.chat_outbox import ChatOutboxStore, NewItem, Op, Posted

CHANNEL = "C0PACE"
NOW = 1000.0


class PacedChat:
    """Slack at its pace, one attempt per call: ``allow`` posts may go, every further
    post is refused as the shared budget refuses it (throttled, due again at once)."""

    def __init__(self) -> None:
        self.allow = 0
        self.sent: list[str] = []  # the text of each delivered post, in order
        self._n = 0

    def post_once(self, channel: str, message: ChatMessage, thread: MessageRef | None,
                  key: str) -> MessageRef:
        if self.allow <= 0:
            raise ChatSendError("slack budget", transient=True, retry_after_s=0.0,
                                throttled=True)
        self.allow -= 1
        self._n += 1
        self.sent.append(message.text)
        return MessageRef(channel, f"{NOW:.0f}.{self._n:06d}")

    def update_once(self, ref: MessageRef, message: ChatMessage) -> None:
        """Edits have their own budget (not the channel's posts)."""

    def find_posted(self, channel: str, thread: MessageRef | None, key: str,
                    oldest: float, *, prefix: bool = False) -> MessageRef | None:
        return None


def outbox(redis: Redis, chat: PacedChat, parents_first: bool = True,
           post_spacing_s: float = 0.0) -> ChatOutbox:
    """The clock stands still: each drain pass is Slack's next second (so the posts a pass
    finds waiting are not spaced out by the clock unless a test asks for it)."""
    return ChatOutbox(ChatOutboxStore(redis), chat, clock=lambda: NOW,  # type: ignore[arg-type]
                      parents_first=parents_first, post_spacing_s=post_spacing_s)


def card(iid: str) -> ChatMessage:
    return ChatMessage(text=f"{iid} card", incident_id=iid)


def reply(iid: str) -> ChatMessage:
    return ChatMessage(text=f"{iid} reply", incident_id=iid)


def drain_one_post_at_a_time(box: ChatOutbox, chat: PacedChat, passes: int) -> None:
    """The channel takes one post a pass, as Slack's one post a second would."""
    for _ in range(passes):
        chat.allow = 1
        box.drain_once(NOW)


def test_waiting_parents_go_before_other_incidents_replies(redis: Redis) -> None:
    chat = PacedChat()
    box = outbox(redis, chat)
    chat.allow = 3
    for iid in ("A", "B", "C"):  # three incidents already posted, their replies throttled
        assert box.send(iid, CARD, Op.POST, card(iid), CHANNEL) is not None
    for iid in ("A", "B", "C"):
        assert box.send(iid, "evidence", Op.POST, reply(iid), CHANNEL, thread_of=CARD) is None
    for iid in ("D", "E", "F"):  # then three new incidents, at the channel's pace
        assert box.send(iid, CARD, Op.POST, card(iid), CHANNEL) is None
    box.send("D", "evidence", Op.POST, reply("D"), CHANNEL, thread_of=CARD)
    drain_one_post_at_a_time(box, chat, 7)
    assert chat.sent[:3] == ["A card", "B card", "C card"]
    waited = chat.sent[3:]
    assert waited[:3] == ["D card", "E card", "F card"], waited
    assert sorted(waited[3:]) == ["A reply", "B reply", "C reply", "D reply"]
    assert waited.index("D reply") > waited.index("D card")  # its own order holds
    store = ChatOutboxStore(redis)
    assert all(store.pending(i) == 0 for i in "ABCDEF")
    assert store.due_incidents(NOW + 60) == []


def test_a_reply_does_not_take_the_channel_from_a_waiting_parent(redis: Redis) -> None:
    chat = PacedChat()
    box = outbox(redis, chat)
    chat.allow = 1
    assert box.send("A", CARD, Op.POST, card("A"), CHANNEL) is not None
    assert box.send("B", CARD, Op.POST, card("B"), CHANNEL) is None  # throttled: waits
    chat.allow = 1  # the channel's next post is free, and a reply of A asks first
    assert box.send("A", "evidence", Op.POST, reply("A"), CHANNEL, thread_of=CARD) is None
    assert chat.sent == ["A card"] and chat.allow == 1, "the reply left the slot to B"
    box.send("A", CARD, Op.UPDATE, card("A"), CHANNEL)  # an edit is not held back
    box.drain_once(NOW)
    assert chat.sent == ["A card", "B card"]
    drain_one_post_at_a_time(box, chat, 1)
    assert chat.sent == ["A card", "B card", "A reply"]


def test_the_top_level_lane_follows_the_head(redis: Redis) -> None:
    """The lane holds an incident exactly while its head is a top-level post: after the
    card is delivered its reply is the head, and the incident leaves the lane."""
    store = ChatOutboxStore(redis)
    store.append("A", NewItem(Op.POST, CARD, message_to_json(card("A")), CHANNEL), NOW)
    store.append("A", NewItem(Op.POST, "evidence", message_to_json(reply("A")), CHANNEL,
                              thread_of=CARD), NOW)
    store.append("B", NewItem(Op.POST, "evidence", message_to_json(reply("B")), CHANNEL,
                              thread_ts="1.1"), NOW - 5)
    assert store.due_incidents(NOW) == ["A", "B"], "the parent first, though B is older"
    assert store.top_level_due(NOW)
    for iid, queued in (("Z", NOW - 2), ("Y", NOW - 1)):  # two earlier parents
        store.append(iid, NewItem(Op.POST, CARD, message_to_json(card(iid)), CHANNEL), queued)
    assert store.due_incidents(NOW) == ["Z", "Y", "A", "B"], "parents in the order queued"
    assert store.due_incidents(NOW - 1.5) == ["Z", "B"]  # and only the due ones
    for iid in ("Z", "Y"):
        got = store.claim(iid, NOW, "t0")
        assert got is not None and store.ack(got, Posted(CHANNEL, f"{iid}.1", f"{iid}.1"))
    head = store.claim("A", NOW, "t1")
    assert head is not None and head.purpose == CARD
    assert store.ack(head, Posted(CHANNEL, "2.2", "2.2"))
    assert not store.top_level_due(NOW + 60)
    assert store.due_incidents(NOW) == ["B", "A"]


def test_without_parents_first_the_older_replies_take_the_channel(redis: Redis) -> None:
    """The switch the benchmark uses: in plain due order the replies queued first go first."""
    chat = PacedChat()
    box = outbox(redis, chat, parents_first=False)
    chat.allow = 1
    assert box.send("A", CARD, Op.POST, card("A"), CHANNEL) is not None
    box.send("A", "evidence", Op.POST, reply("A"), CHANNEL, thread_of=CARD)
    box.send("B", CARD, Op.POST, card("B"), CHANNEL)
    drain_one_post_at_a_time(box, chat, 2)
    assert chat.sent == ["A card", "A reply", "B card"]


def test_waiting_posts_are_spaced_by_their_turn_not_all_due_at_the_next_slot(
        redis: Redis) -> None:
    """Twenty posts waiting for one channel (a storm's members): a drain pass gives the
    n-th of them back due n seconds later, so the next pass claims one, not twenty
    (issue 37: 200 waiting posts were ~1,000 Redis commands a second)."""
    chat = PacedChat()
    box = outbox(redis, chat, post_spacing_s=1.0)
    for n in range(20):
        assert box.send(f"M{n}", CARD, Op.POST, card(f"M{n}"), CHANNEL) is None
    box.drain_once(NOW)
    store = ChatOutboxStore(redis)
    assert len(store.due_incidents(NOW)) == 1  # the first waits for the next slot only
    assert len(store.due_incidents(NOW + 5)) == 6
    assert len(store.due_incidents(NOW + 25)) == 20
    chat.allow = 1
    box.drain_once(NOW)
    assert chat.sent == ["M0 card"], "the order they came in holds"


class SpentChannel(PacedChat):
    """The channel's post budget spent for the next second (the shared budget's answer),
    edits delivered and recorded: they have their own budget."""

    def __init__(self) -> None:
        super().__init__()
        self.edits: list[str] = []

    def post_once(self, channel: str, message: ChatMessage, thread: MessageRef | None,
                  key: str) -> MessageRef:
        if self.allow <= 0:
            raise ChatSendError("slack budget", transient=True, retry_after_s=1.0,
                                throttled=True)
        return super().post_once(channel, message, thread, key)

    def update_once(self, ref: MessageRef, message: ChatMessage) -> None:
        self.edits.append(message.text)


def _card_with_waiting_replies(box: ChatOutbox, chat: SpentChannel) -> MessageRef:
    chat.allow = 1
    ref = box.send("A", CARD, Op.POST, card("A"), CHANNEL)
    assert ref is not None
    assert box.send("A", "evidence", Op.POST, reply("A"), CHANNEL, thread_of=CARD) is None
    assert box.send("A", "result", Op.POST, ChatMessage(text="A result"), CHANNEL,
                    thread_of=CARD) is None
    return ref


def test_the_cards_edit_goes_past_its_replies_waiting_for_the_channel(redis: Redis) -> None:
    """Issue 39: in a channel at Slack's post pace, an incident's thread replies wait their
    turn; the card's edit to its final state does not wait behind them (the chaos run saw
    a card say "Fixed" 10 s after the host was, behind its own result reply). The replies
    keep their order, and go when the channel has room."""
    chat = SpentChannel()
    box = outbox(redis, chat)
    ref = _card_with_waiting_replies(box, chat)
    assert box.send("A", CARD, Op.UPDATE, card("A fixed"), CHANNEL, ref=ref) == ref
    assert chat.edits == ["A fixed card"] and chat.sent == ["A card"]
    store = ChatOutboxStore(redis)
    assert [purpose for _, _, purpose, _ in store.pending_items("A")] == ["evidence", "result"]
    chat.allow = 2
    box.drain_once(NOW + 1)
    box.drain_once(NOW + 2)
    assert chat.sent == ["A card", "A reply", "A result"]
    assert store.pending("A") == 0 and store.due_incidents(NOW + 60) == []


def test_an_edit_queued_behind_a_waiting_reply_makes_its_incident_due(redis: Redis) -> None:
    """The retry loop finds the edit: the incident's score is when the edit can go, not
    when the reply it passes can."""
    store = ChatOutboxStore(redis)
    store.append("A", NewItem(Op.POST, "evidence", message_to_json(reply("A")), CHANNEL,
                              thread_ts="1.1"), NOW)
    head = store.claim("A", NOW, "t1")
    assert head is not None and store.release(head, NOW + 30, "", False)
    assert store.due_incidents(NOW) == []
    store.append("A", NewItem(Op.UPDATE, CARD, message_to_json(card("A")), CHANNEL,
                              ref_ts="1.1"), NOW + 1)
    assert store.due_incidents(NOW + 1) == ["A"]
    edit = store.claim("A", NOW + 1, "t2")
    assert edit is not None and edit.purpose == CARD
    assert store.ack(edit, Posted(CHANNEL, "1.1", "1.1"))
    assert store.due_incidents(NOW + 1) == [] and store.due_incidents(NOW + 30) == ["A"]


def test_posts_never_overtake_and_a_waiting_first_post_holds_everything(redis: Redis) -> None:
    """Only edits pass a waiting reply: a later reply keeps its place behind it, and
    nothing passes the incident's own first post (its edits need its ``ts``)."""
    store = ChatOutboxStore(redis)
    store.append("A", NewItem(Op.POST, "evidence", message_to_json(reply("A")), CHANNEL,
                              thread_ts="1.1"), NOW)
    store.append("A", NewItem(Op.POST, "result", message_to_json(reply("A")), CHANNEL,
                              thread_ts="1.1"), NOW)
    head = store.claim("A", NOW, "t1")
    assert head is not None and store.release(head, NOW + 30, "", False)
    assert store.claim("A", NOW + 1, "t2") is None, "a reply does not pass a reply"
    store.append("B", NewItem(Op.POST, CARD, message_to_json(card("B")), CHANNEL), NOW)
    first = store.claim("B", NOW, "t3")
    assert first is not None and store.release(first, NOW + 30, "", False)
    store.append("B", NewItem(Op.UPDATE, CARD, message_to_json(card("B")), CHANNEL), NOW)
    assert store.claim("B", NOW + 1, "t4") is None, "nothing passes the first post"


def test_without_overtaking_the_edit_waits_behind_the_replies(redis: Redis) -> None:
    """The switch the benchmark uses (before issue 39)."""
    chat = SpentChannel()
    box = ChatOutbox(ChatOutboxStore(redis, edits_overtake=False), chat,  # type: ignore[arg-type]
                     clock=lambda: NOW, post_spacing_s=0.0)
    ref = _card_with_waiting_replies(box, chat)
    assert box.send("A", CARD, Op.UPDATE, card("A fixed"), CHANNEL, ref=ref) is None
    assert chat.edits == []


def test_the_first_edit_of_a_taken_over_card_keeps_the_thread_it_sits_in(
        redis: Redis) -> None:
    """An incident re-opened after a data loss takes over the lost one's card, which may
    be a reply in a storm's thread: its first edit records that thread, not the card's own
    ``ts`` (its evidence and notes would otherwise go as replies to a reply)."""
    chat = SpentChannel()
    box = outbox(redis, chat)
    card_ref, storm_thread = MessageRef(CHANNEL, "5.5"), MessageRef(CHANNEL, "4.4")
    assert box.send("R", CARD, Op.UPDATE, card("R"), CHANNEL, ref=card_ref,
                    thread=storm_thread) == card_ref
    assert box.send("S", CARD, Op.UPDATE, card("S"), CHANNEL, ref=card_ref) == card_ref
    posted = ChatOutboxStore(redis)
    assert posted.posted("R")[CARD] == Posted(CHANNEL, "5.5", "4.4")
    assert posted.posted("S")[CARD] == Posted(CHANNEL, "5.5", "5.5"), "its own, else"
