"""The durable chat outbox: every post or edit of an incident's chat, in order, until delivered.

Slack answering 500 for a while, or 429 with ``Retry-After``, must not lose an incident's
message. Each incident has its own ordered queue of items (a ZSET of sequence numbers and
a hash of item JSON); a global ZSET scores each incident id by when its *head* item is due.

- Claiming is a compare-and-swap in one Lua script (as st2's ``handling`` flag): only a
  due, unclaimed head is taken, and its claim expires (``lease_s``) so a sender that died
  holding it does not block the incident for good (its try may have reached Slack, so the
  item is marked uncertain). Two replicas never send one item at once.
- A failed send never sleeps: ``release`` moves the item's due time (``Retry-After`` or a
  backoff) and frees the claim; the waiting head blocks the incident's later posts, so
  order holds per incident (rq's rate limiter lets a delayed retry be overtaken; we do not).
  One exception (issue 39): while the head is a thread reply waiting for the channel's
  post budget, the first edit behind it may go (edits have their own budget), so the
  card shows the incident's state without waiting for its evidence and result replies.
  An edit never passes another edit, nor the incident's own first post.
- An edit that a newer item of the same purpose replaces (a later one, or a render with a
  higher sequence number, queued or sent) is dropped unsent when it comes up: after an
  outage the card is edited once, to its newest render, and a render that lost a race
  between replicas never overwrites a newer one.
- ``ack`` records where a purpose ("incident-card", "evidence" …) was posted in the same
  script that removes the item, so a retried post of a purpose that already has a ``ts`` is
  sent as an edit: a lost response cannot produce a second card.
- The audit entry of a late delivery (or a give-up) is written in the same script as the
  ack, so the timeline and the queue never disagree.
- Parents first (issue 29): a second ZSET keeps the due incidents whose head is a top-level
  post (an incident's own message, not a thread reply) or an urgent item (a storm's table,
  issue 37: the one message that shows a whole burst), kept by the same scripts as the due
  ZSET. ``due_incidents`` lists those first, so when Slack's pace (about one post a second
  per channel) is the limit, twelve new incidents get their messages before anyone's
  evidence replies; each incident's own items keep their order.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from redis import Redis
from redis.client import Pipeline

from storage import keys
from storage.audit import GLOBAL_MAXLEN, entry_fields
from storage.leases import holder_dead


class Op(StrEnum):
    POST = "post"
    UPDATE = "update"


@dataclass(frozen=True)
class Posted:
    """Where a purpose's message lives: its ``ts`` and the thread it sits in (its own
    ``ts`` for a top-level message, the parent's for a reply)."""

    channel: str
    ts: str
    thread_ts: str

    def to_json(self) -> str:
        return json.dumps({"channel": self.channel, "ts": self.ts, "thread_ts": self.thread_ts})

    @classmethod
    def from_json(cls, raw: str) -> Posted:
        data = json.loads(raw)
        return cls(str(data["channel"]), str(data["ts"]), str(data.get("thread_ts") or data["ts"]))


@dataclass(frozen=True)
class NewItem:
    """What a step asks the outbox to deliver. ``message`` is the serialized chat message
    (opaque here: storage does not know the chat model). ``thread_of`` names a purpose of
    the same incident whose thread the reply goes to, resolved when it is sent."""

    op: Op
    purpose: str
    message: str
    channel: str
    thread_ts: str = ""
    thread_of: str = ""
    ref_ts: str = ""
    version: int = 0  # the render's sequence number: an older one never overwrites a newer
    urgent: bool = False  # in the top-level lane though not a first post (a storm's table)
    # a top-level post that first looks for a top-level message another incident's outbox
    # posted (its key under ``key_prefix(look_for)``, posted after ``look_since``) and edits
    # that one instead: a re-opened incident's card after a data loss (issue 39)
    look_for: str = ""
    look_since: float = 0.0


@dataclass(frozen=True)
class OutboxItem:
    """One stored item, as a sender claimed it."""

    incident_id: str
    seq: int
    op: Op
    purpose: str
    message: str
    channel: str
    thread_ts: str
    thread_of: str
    ref_ts: str
    attempts: int  # sends tried, this claim included
    due: float
    created: float
    uncertain: bool  # the last try may have reached Slack (timeout, reset): look before posting
    last_error: str
    token: str  # this claim's token; ack/release need it
    urgent: bool = False  # queued urgent (a storm's table): first in line, first to Slack
    look_for: str = ""  # ``NewItem.look_for``: whose post to take over, if Slack has one
    look_since: float = 0.0

    @property
    def key(self) -> str:
        """Stable per item: tagged on the posted message so a lost response can be found."""
        return f"{key_prefix(self.incident_id)}{self.seq}"


def key_prefix(incident_id: str) -> str:
    """What every item key of ``incident_id`` starts with (and no other incident's does)."""
    return f"{incident_id}/"


# Every script that moves an incident in the due ZSET calls ``remark`` (or ``mark``,
# ``unmark``), so the top-level lane (KEYS: due top) holds exactly the queued incidents
# whose head is a top-level post, scored by when that post was queued: the first alert's
# message goes first (its due time is in the due ZSET; throttled posts all share the next
# free slot). An incident's score is when its head can go, or sooner when an edit behind
# a waiting thread reply can (``OVERTAKE``): the card's newest state is not held up by
# replies waiting for the channel's post budget.
LANE = """
local OVERTAKE = __OVERTAKE__
local SCAN = 16
local function top_level(item)
  if item.lane == 'top' then return true end
  return item.op == 'post' and (item.thread_ts or '') == '' and (item.thread_of or '') == ''
end
local function mark(due_key, top_key, id, score, item)
  redis.call('ZADD', due_key, score, id)
  if top_level(item) then
    redis.call('ZADD', top_key, item.created or score, id)
  else
    redis.call('ZREM', top_key, id)
  end
end
local function unmark(due_key, top_key, id)
  redis.call('ZREM', due_key, id)
  redis.call('ZREM', top_key, id)
end
local function ready_at(item)
  if item.claim ~= '' and item.claim_until > item.due then return item.claim_until end
  return item.due
end
local function is_edit(item, posted_key)
  return item.op == 'update' or redis.call('HEXISTS', posted_key, item.purpose) == 1
end
-- the first edit queued behind a head that is a thread reply (posts keep their order; an
-- edit never overtakes another edit): seq and item, or nil
local function edit_behind(queue_key, items_key, posted_key, head)
  if not OVERTAKE or head.op ~= 'post' or top_level(head) then return nil end
  for _, seq in ipairs(redis.call('ZRANGE', queue_key, 1, SCAN)) do
    local raw = redis.call('HGET', items_key, seq)
    if raw then
      local item = cjson.decode(raw)
      if is_edit(item, posted_key) then return seq, item end
    end
  end
  return nil
end
local function score(queue_key, items_key, posted_key, head)
  local at = ready_at(head)
  local _, edit = edit_behind(queue_key, items_key, posted_key, head)
  if edit and ready_at(edit) < at then at = ready_at(edit) end
  return at
end
local function remark(queue_key, items_key, posted_key, due_key, top_key, id)
  while true do
    local head = redis.call('ZRANGE', queue_key, 0, 0)[1]
    if not head then
      unmark(due_key, top_key, id)
      return
    end
    local raw = redis.call('HGET', items_key, head)
    if raw then
      local item = cjson.decode(raw)
      mark(due_key, top_key, id, score(queue_key, items_key, posted_key, item), item)
      return
    end
    redis.call('ZREM', queue_key, head)
  end
end
"""

# KEYS: seq counter, queue, items, due, newest, due top, posted
# ARGV: incident id, item JSON, due, purpose, version (a render's sequence number, 0: none)
# ``newest`` keeps, per purpose, "version:seq" of the item with the highest version (the
# later one on a tie), so a render that took its number earlier but arrived later loses.
APPEND = LANE + """
local seq = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[3], seq, ARGV[2])
redis.call('ZADD', KEYS[2], seq, seq)
local current = redis.call('HGET', KEYS[5], ARGV[4])
local version = tonumber(ARGV[5])
if not current or version >= tonumber(string.match(current, '^(%d+):')) then
  redis.call('HSET', KEYS[5], ARGV[4], ARGV[5] .. ':' .. seq)
end
remark(KEYS[2], KEYS[3], KEYS[7], KEYS[4], KEYS[6], ARGV[1])
return seq
"""

# KEYS: queue, items, due, posted, newest, due top
# ARGV: incident id, now, token, lease seconds, expected seq ('')
# An edit of a message that a newer item of the same purpose replaces (a later or a
# higher-numbered render, queued or already sent) is dropped unsent: a render queue is
# not replayed render by render after an outage, and an older render never overwrites a
# newer one. A first post never is (replies may be queued for its thread), nor a try
# that may have reached Slack. While the head waits (its due time, or another sender's
# claim) and it is a thread reply, the first edit behind it may go instead.
CLAIM = LANE + """
local now = tonumber(ARGV[2])
local function superseded(seq, item)
  if not is_edit(item, KEYS[4]) or item.uncertain then return false end
  local newest = redis.call('HGET', KEYS[5], item.purpose)
  local newest_seq = newest and tonumber(string.match(newest, ':(%d+)$')) or 0
  return newest_seq ~= tonumber(seq)
end
local function take(seq, item)
  if item.claim ~= '' then item.uncertain = true end
  item.claim = ARGV[3]
  item.claim_until = now + tonumber(ARGV[4])
  item.attempts = item.attempts + 1
  local raw = cjson.encode(item)
  redis.call('HSET', KEYS[2], seq, raw)
  remark(KEYS[1], KEYS[2], KEYS[4], KEYS[3], KEYS[6], ARGV[1])
  return {seq, raw}
end
local function overtake(head)
  while true do
    local seq, edit = edit_behind(KEYS[1], KEYS[2], KEYS[4], head)
    if not edit then break end
    if superseded(seq, edit) then
      redis.call('HDEL', KEYS[2], seq)
      redis.call('ZREM', KEYS[1], seq)
    elseif ready_at(edit) <= now and (ARGV[5] == '' or ARGV[5] == seq) then
      return take(seq, edit)
    else
      break
    end
  end
  remark(KEYS[1], KEYS[2], KEYS[4], KEYS[3], KEYS[6], ARGV[1])
  return false
end
while true do
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not head then
    unmark(KEYS[3], KEYS[6], ARGV[1])
    return false
  end
  local raw = redis.call('HGET', KEYS[2], head)
  if not raw then
    redis.call('ZREM', KEYS[1], head)
  else
    local item = cjson.decode(raw)
    if ready_at(item) > now then
      return overtake(item)
    end
    if superseded(head, item) then
      redis.call('HDEL', KEYS[2], head)
      redis.call('ZREM', KEYS[1], head)
    else
      if ARGV[5] ~= '' and head ~= ARGV[5] then
        remark(KEYS[1], KEYS[2], KEYS[4], KEYS[3], KEYS[6], ARGV[1])
        return false
      end
      return take(head, item)
    end
  end
end
"""

# The end of an item: delivered (mode 'ack': remember where its purpose was posted) or
# given up ('drop'). KEYS: queue, items, posted, due, audit, audit all, due top, untold.
# ARGV: incident id, seq, token, mode, posted JSON, audit max length, tell ('1': keep the
# delivery in untold until the flow is told), n audit fields, k v …
FINISH = LANE + """
local raw = redis.call('HGET', KEYS[2], ARGV[2])
if not raw then return 0 end
local item = cjson.decode(raw)
if item.claim ~= ARGV[3] then return 0 end
local first = redis.call('HEXISTS', KEYS[3], item.purpose) == 0
if ARGV[4] == 'ack' and (item.op == 'post' or first) then
  redis.call('HSET', KEYS[3], item.purpose, ARGV[5])
end
if ARGV[4] == 'ack' and ARGV[7] == '1' then
  redis.call('SADD', KEYS[8], ARGV[1] .. '\t' .. item.purpose .. '\t' .. ARGV[2])
end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[1], ARGV[2])
remark(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7], ARGV[1])
local n = tonumber(ARGV[8])
if n > 0 then
  local fields = {}
  for i = 1, n * 2 do fields[i] = ARGV[8 + i] end
  redis.call('XADD', KEYS[5], '*', unpack(fields))
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[6], '*', unpack(fields))
end
return 1
"""

# KEYS: items, due, audit, audit all, due top, queue, posted; ARGV: incident id, seq,
# token, due, error, uncertain ('1'/''), audit max length, n audit fields, k v …
RELEASE = LANE + """
local raw = redis.call('HGET', KEYS[1], ARGV[2])
if not raw then return 0 end
local item = cjson.decode(raw)
if item.claim ~= ARGV[3] then return 0 end
item.claim = ''
item.claim_until = 0
item.due = tonumber(ARGV[4])
item.last_error = ARGV[5]
item.uncertain = (ARGV[6] == '1') or item.uncertain
redis.call('HSET', KEYS[1], ARGV[2], cjson.encode(item))
remark(KEYS[6], KEYS[1], KEYS[7], KEYS[2], KEYS[5], ARGV[1])
local n = tonumber(ARGV[8])
if n > 0 then
  local fields = {}
  for i = 1, n * 2 do fields[i] = ARGV[8 + i] end
  redis.call('XADD', KEYS[3], '*', unpack(fields))
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', unpack(fields))
end
return 1
"""


@dataclass(frozen=True)
class Untold:
    """A delivery the flow has not been told of yet (``ChatOutboxStore.untold``)."""

    incident_id: str
    purpose: str
    seq: int

    def member(self) -> str:
        return f"{self.incident_id}\t{self.purpose}\t{self.seq}"

    @classmethod
    def parse(cls, member: str) -> Untold | None:
        parts = member.split("\t")
        if len(parts) != 3 or not parts[2].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]))


@dataclass(frozen=True)
class AuditNote:
    """An audit entry written in the same script as the queue change it records."""

    action: str
    detail: dict[str, Any]
    actor: str = "bot"


class ChatOutboxStore:
    def __init__(self, redis: Redis, *, lease_s: float = 30.0,
                 edits_overtake: bool = True) -> None:
        """``edits_overtake`` False: every item waits behind its incident's head, an edit of
        the card behind a thread reply that waits for the channel too (before issue 39;
        ``bench/card_behind_replies.py`` measures both)."""
        self.redis, self.lease_s = redis, lease_s
        flag = "true" if edits_overtake else "false"

        def script(source: str) -> Any:
            return redis.register_script(source.replace("__OVERTAKE__", flag))

        self._append = script(APPEND)
        self._claim = script(CLAIM)
        self._finish = script(FINISH)
        self._release = script(RELEASE)

    @staticmethod
    def new_token() -> str:
        """``host:pid:random``: unique per claim, and it names the process that holds it,
        so a claim left by a killed sender on this machine is taken back at once
        (``reclaim_dead``) rather than after its lease."""
        return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"

    # --- writers ------------------------------------------------------------------------
    def append(self, incident_id: str, item: NewItem, now: float) -> int:
        """Queue ``item`` at the incident's tail, due now; its sequence number."""
        return int(self._append(keys=_append_keys(incident_id),
                                args=[incident_id, _item_json(item, now), repr(now),
                                      item.purpose, str(max(0, item.version))]))

    def append_to(self, pipe: Pipeline, incident_id: str, item: NewItem, now: float) -> None:
        """Queue the append in a caller's MULTI, so it commits with the incident write."""
        self._append(keys=_append_keys(incident_id),
                     args=[incident_id, _item_json(item, now), repr(now), item.purpose,
                           str(max(0, item.version))], client=pipe)

    def claim(self, incident_id: str, now: float, token: str,
              expect_seq: int | None = None) -> OutboxItem | None:
        """Take the incident's head item if it is due and nobody holds it (or their claim
        expired); with ``expect_seq``, only if that item is the head."""
        got = self._claim(
            keys=[keys.outbox_queue(incident_id), keys.outbox_items(incident_id),
                  keys.outbox_due(), keys.outbox_posted(incident_id),
                  keys.outbox_newest(incident_id), keys.outbox_due_top()],
            args=[incident_id, repr(now), token, repr(self.lease_s),
                  "" if expect_seq is None else str(expect_seq)])
        if not got:
            return None
        seq, raw = got
        return _item(incident_id, int(seq), json.loads(raw))

    def ack(self, item: OutboxItem, posted: Posted, note: AuditNote | None = None,
            now: float = 0.0, *, tell: bool = False) -> bool:
        """Delivered: remember where its purpose lives, drop it, the next item is due.
        False when this claim was lost (another sender took it after the lease). ``tell``:
        the delivery is also kept in ``untold`` until ``told`` says the flow knows it."""
        return self._end(item, "ack", posted.to_json(), note, now, tell=tell)

    def drop(self, item: OutboxItem, note: AuditNote, now: float) -> bool:
        """Give up on an item Slack refuses for good; the incident's next item is due."""
        return self._end(item, "drop", "", note, now)

    def untold(self) -> list[Untold]:
        """The deliveries acked with ``tell`` whose place nobody has told yet (a sender
        killed between the ack and the telling, or Redis refusing the telling's write),
        each incident's in the order it was sent."""
        members = [str(m) for m in self.redis.smembers(keys.outbox_untold())]  # type: ignore[union-attr]
        found = [u for m in members if (u := Untold.parse(m)) is not None]
        return sorted(found, key=lambda u: (u.incident_id, u.seq))

    def told(self, incident_id: str, purpose: str, seq: int) -> None:
        """The flow knows where this delivery went (a delete: Redis takes it even when out
        of memory)."""
        self.redis.srem(keys.outbox_untold(), Untold(incident_id, purpose, seq).member())

    def release(self, item: OutboxItem, due: float, error: str, uncertain: bool,
                note: AuditNote | None = None, now: float = 0.0) -> bool:
        """Not delivered this time: due again at ``due``; it stays the head meanwhile."""
        args = [item.incident_id, str(item.seq), item.token, repr(due), error[:300],
                "1" if uncertain else "", str(GLOBAL_MAXLEN), *_audit_args(item, note, now)]
        return bool(self._release(
            keys=[keys.outbox_items(item.incident_id), keys.outbox_due(),
                  keys.audit(item.incident_id), keys.audit_all(), keys.outbox_due_top(),
                  keys.outbox_queue(item.incident_id), keys.outbox_posted(item.incident_id)],
            args=args))

    def _end(self, item: OutboxItem, mode: str, posted: str, note: AuditNote | None,
             now: float, *, tell: bool = False) -> bool:
        iid = item.incident_id
        args = [iid, str(item.seq), item.token, mode, posted, str(GLOBAL_MAXLEN),
                "1" if tell else "", *_audit_args(item, note, now)]
        return bool(self._finish(
            keys=[keys.outbox_queue(iid), keys.outbox_items(iid), keys.outbox_posted(iid),
                  keys.outbox_due(), keys.audit(iid), keys.audit_all(),
                  keys.outbox_due_top(), keys.outbox_untold()], args=args))

    # --- readers ------------------------------------------------------------------------
    def due_incidents(self, now: float, limit: int = 100, *,
                      parents_first: bool = True) -> list[str]:
        """Incident ids whose head item is due (or whose claim expired): those whose head
        is a top-level post first (parents before thread replies), each part most overdue
        first (``parents_first`` False: all in due order)."""
        if not parents_first:
            return [str(i) for i in self.redis.zrangebyscore(  # type: ignore[union-attr]
                keys.outbox_due(), "-inf", repr(now), start=0, num=limit)]
        first = self._top_level_due(now, limit)
        every = self.redis.zrangebyscore(keys.outbox_due(), "-inf", repr(now), start=0,
                                         num=limit)
        seen = set(first)
        return (first + [str(i) for i in every if str(i) not in seen])[:limit]  # type: ignore[union-attr]

    def top_level_due(self, now: float) -> bool:
        """Whether an incident's own first message is due and waiting (a thread reply then
        waits its turn behind it rather than take the channel's next post)."""
        return bool(self._top_level_due(now, 100))

    def _top_level_due(self, now: float, limit: int) -> list[str]:
        """The lane's incidents whose head is due, the earliest queued first."""
        top = [str(i) for i in self.redis.zrange(keys.outbox_due_top(), 0, limit - 1)]  # type: ignore[union-attr]
        if not top:
            return []
        scores = self.redis.zmscore(keys.outbox_due(), top)
        return [i for i, due in zip(top, scores, strict=True)  # type: ignore[arg-type]
                if due is not None and float(due) <= now]

    def next_due(self) -> float | None:
        """When the earliest head item is due (None: nothing queued)."""
        first = self.redis.zrange(keys.outbox_due(), 0, 0, withscores=True)
        return float(first[0][1]) if first else None  # type: ignore[index]

    def reclaim_dead(self, now: float, limit: int = 200) -> int:
        """Give back the claims whose sender process on this machine is gone (a killed
        ``serve`` restarted here): their items are due again now, uncertain (the post may
        have gone out), instead of a lease later. A claimed head's due score is its claim's
        end, so only incidents scored in the future are read. The number given back."""
        given = 0
        for incident_id in self.redis.zrangebyscore(  # type: ignore[union-attr]
                keys.outbox_due(), f"({now!r}", "+inf", start=0, num=limit):
            given += self._give_back(str(incident_id), holder_dead, now, "its sender died")
        return given

    def unclaim(self, incident_id: str, token: str, now: float, error: str) -> bool:
        """Give back the item ``token`` holds, if it still does (a claim whose sender lost
        Redis mid-send, or lost the claim's own answer): due again at once, uncertain so
        the next try looks for a post before making one. False when nothing held it."""
        return self._give_back(incident_id, lambda held: held == token, now, error) > 0

    def _give_back(self, incident_id: str, holds: Callable[[str], bool], now: float,
                   error: str) -> int:
        """Release the incident's claimed items whose token ``holds`` picks: due again at
        their old due time (or now), marked uncertain. The number released."""
        given = 0
        raw = self.redis.hgetall(keys.outbox_items(incident_id))
        for seq, data in raw.items():  # type: ignore[union-attr]
            item = _item(incident_id, int(seq), json.loads(data))
            if item.token and holds(item.token):
                given += self.release(item, min(item.due, now), error, True, None, now)
        return given

    def posted(self, incident_id: str) -> dict[str, Posted]:
        raw = self.redis.hgetall(keys.outbox_posted(incident_id))
        return {str(k): Posted.from_json(str(v)) for k, v in raw.items()}  # type: ignore[union-attr]

    def pending(self, incident_id: str) -> int:
        return int(self.redis.zcard(keys.outbox_queue(incident_id)))  # type: ignore[arg-type]

    def pending_items(self, incident_id: str) -> list[tuple[int, str, str, int]]:
        """(seq, op, purpose, attempts) of the incident's queued items, head first."""
        seqs = [str(s) for s in self.redis.zrange(keys.outbox_queue(incident_id), 0, -1)]  # type: ignore[union-attr]
        raws = self.redis.hmget(keys.outbox_items(incident_id), seqs) if seqs else []
        rows = []
        for seq, raw in zip(seqs, raws, strict=True):  # type: ignore[arg-type]
            if raw:
                data = json.loads(raw)
                rows.append((int(seq), str(data["op"]), str(data["purpose"]),
                             int(data["attempts"])))
        return rows


def _append_keys(incident_id: str) -> list[str]:
    return [keys.outbox_seq(incident_id), keys.outbox_queue(incident_id),
            keys.outbox_items(incident_id), keys.outbox_due(), keys.outbox_newest(incident_id),
            keys.outbox_due_top(), keys.outbox_posted(incident_id)]


def _item_json(item: NewItem, now: float) -> str:
    return json.dumps({
        "op": item.op.value, "purpose": item.purpose, "message": item.message,
        "channel": item.channel, "thread_ts": item.thread_ts, "thread_of": item.thread_of,
        "ref_ts": item.ref_ts, "version": item.version, "lane": "top" if item.urgent else "",
        "look_for": item.look_for, "look_since": item.look_since,
        "attempts": 0, "due": now, "created": now,
        "claim": "", "claim_until": 0, "uncertain": False, "last_error": "",
    })


def _item(incident_id: str, seq: int, data: dict[str, Any]) -> OutboxItem:
    return OutboxItem(
        incident_id=incident_id, seq=seq, op=Op(str(data["op"])), purpose=str(data["purpose"]),
        message=str(data["message"]), channel=str(data["channel"]),
        thread_ts=str(data.get("thread_ts") or ""), thread_of=str(data.get("thread_of") or ""),
        ref_ts=str(data.get("ref_ts") or ""), attempts=int(data["attempts"]),
        due=float(data["due"]), created=float(data["created"]),
        uncertain=bool(data.get("uncertain")), last_error=str(data.get("last_error") or ""),
        token=str(data["claim"]), urgent=data.get("lane") == "top",
        look_for=str(data.get("look_for") or ""), look_since=float(data.get("look_since") or 0))


def _audit_args(item: OutboxItem, note: AuditNote | None, now: float) -> list[str]:
    if note is None:
        return ["0"]
    fields = entry_fields(item.incident_id, note.actor, note.action, note.detail, None, now)
    flat = [str(x) for pair in fields.items() for x in pair]
    return [str(len(fields)), *flat]
