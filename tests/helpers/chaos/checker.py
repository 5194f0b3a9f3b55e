"""The chaos run's checker: the history (the driver's record, the Slack stand-in's record,
the hosts' command logs, the audit left in Redis, the serve logs) against the invariants.

1. every alert answered once: each delivery got its 2xx in the end, and each incident has
   one message in the channel (one per lost epoch for the data-loss announcement, which
   is the one message of an incident it names as closed before its card went out);
2. every incident settled within its deadline plus one period after the last fault that
   could hold it up (one on the ground every incident shares, Redis, a replica or Slack,
   or one on its own host: ``Fault.holds_up``); the driver's bounds (what the bot owes once
   the on-call is done, an arming's whole deadline) count the same way, and an arming it
   gave up on is a violation here too;
3. no action ran twice: per approval one ``action.started``, and a host stopped the unit
   no more often than the on-call approved it;
4. no message said Fixed or Resolved while the host showed the condition (checked live,
   as each message reached Slack: ``Watch``);
5. no 500, and no "internal error" logged (an error of ours);
6. no lost audit entry: each incident's transitions chain from ``open`` to its state, each
   decided approval has its entry, and each stop on a host (since the last loss of Redis's
   data) has the ``action.started`` that sent it;
7. no owed chat lost: once the last fault has healed and the drivers are done, the run
   waits for the chat outbox to empty (``run._drain``); any incident with an item still
   queued then (a thread reply, an edit of its message) is named with what it still owes.
   The driver moves on once an incident's message shows its final state, so its thread
   replies are checked here rather than held against each arming.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.core import strings
from bot.domain.lifecycle import TRANSIENT, IncidentState
from bot.flow.data_loss import ALSO
from bot.rig.slack_standin import Call
from storage.approvals import ApprovalStore
from storage.audit import AuditEntry
from storage.chat_outbox import ChatOutboxStore
from tests.helpers.chaos.driver import Arming, Driver
from tests.helpers.chaos.faults import Fault
from tests.helpers.chaos.world import RECONCILE, UNIT, World
from tests.helpers.serve_process import CHANNEL

WORK_S = 20.0  # a step re-run after a fault: a diagnosis, or an action's read-back
# the words a message earns by observation: the lead of a fixed card, and the state line
# of a verified or resolved incident ("Resolved by" is a person's word, not the bot's)
MARKS = (("Fixed", strings.MSG_LEAD_FIXED.split("{")[0]), ("Verified", "Verified · incident"),
         ("Resolved", "Resolved · incident"))
REOPEN_NOTE = strings.DATA_LOSS_THREAD.split("{")[0]  # "The bot's store lost "
# the note a re-opened incident posts: the lost incident, then the one it is now
NOTE_RE = re.compile(re.escape(REOPEN_NOTE) + r"(INC-\d+) \(.*?\)\. This incident is \*(INC-\d+)\*")
# a data-loss announcement's line for an incident that closed before its card went out
UNSHOWN_RE = re.compile(r"^• (INC-\d+) · .*" + re.escape(
    strings.DATA_LOSS_UNSHOWN_LINE.split("{state}")[1]) + "$", re.MULTILINE)
HOST_RE = re.compile(r"\bgpu-\d\d\b")
INCIDENT_RE = re.compile(r"incident (INC-\d+)")
DEADLINE = {IncidentState.OPEN: RECONCILE["open_s"],
            IncidentState.DIAGNOSING: RECONCILE["diagnosing_s"],
            IncidentState.APPROVED: RECONCILE["acting_s"],
            IncidentState.REMEDIATING: RECONCILE["acting_s"]}


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    def line(self) -> str:
        return f"[{self.invariant}] {self.detail}"


@dataclass(frozen=True)
class Claim:
    """A message that said Fixed or Resolved, and whether its host showed the condition."""

    at: float
    host: str
    word: str
    holds: bool
    text: str
    incident: str = ""


@dataclass
class Watch:
    """Invariant 4, live: each post or edit that says Fixed or Resolved, the moment it
    reaches Slack, held against the host's own state."""

    world: World
    claims: list[Claim] = field(default_factory=list)
    last_chat: float = 0.0  # monotonic: the last post or edit in the channel Slack took
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> None:
        self.world.standin.on_call = self.seen

    def seen(self, call: Call) -> None:
        if call.method not in ("chat.postMessage", "chat.update"):
            return
        if call.params.get("channel") != CHANNEL:
            return
        self.last_chat = call.at
        text = str(call.params.get("text", ""))
        blocks = call.params.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        body = text + json.dumps(blocks or [], ensure_ascii=False)
        words = [w for w, mark in MARKS if mark in body]
        host = HOST_RE.search(text)
        if not words or host is None or strings.DATA_LOSS_HEAD.split(" (")[0] in body:
            return
        try:
            holds = self.world.host(host.group()).condition()
        except StopIteration:
            return
        named = INCIDENT_RE.search(body)
        with self._lock:
            self.claims.append(Claim(time.time(), host.group(), "/".join(words), holds,
                                     text[:160], named.group(1) if named else ""))


@dataclass
class History:
    """Everything the checker reads, gathered once at the end of the run."""

    world: World
    driver: Driver
    faults: list[Fault]
    watch: Watch
    audits: dict[str, list[AuditEntry]] = field(default_factory=dict)
    incidents: dict[str, Any] = field(default_factory=dict)
    owed: dict[str, list[str]] = field(default_factory=dict)  # owner → purposes still queued

    def gather(self) -> History:
        store = self.world.store
        self.incidents = {i.id: i for i in store.list()}
        self.audits = {i: store.audit.timeline(i) for i in self.incidents}
        outbox = ChatOutboxStore(store.redis)
        for owner in outbox.due_incidents(math.inf, limit=100_000, parents_first=False):
            self.owed[owner] = [purpose for _, _, purpose, _ in outbox.pending_items(owner)]
        return self


def check(history: History) -> list[Violation]:
    out: list[Violation] = []
    for rule in (_answered_once, _settled_in_time, _ran_once, _no_false_word, _no_500,
                 _audit_whole, _owed_delivered):
        out.extend(rule(history))
    return out


# --- 1 ----------------------------------------------------------------------------------
def _key(message: dict[str, Any]) -> str:
    """The outbox key that posted a message (``INC-7/1``), '' for none."""
    meta = message.get("metadata")
    meta = json.loads(meta) if isinstance(meta, str) else (meta or {})
    return str((meta.get("event_payload") or {}).get("key", ""))


def _posts(world: World) -> list[tuple[str, dict[str, Any]]]:
    """Top-level messages Slack holds in the incident channel (a refused post is not one),
    each with the owner of the outbox key that posted it."""
    return [(_key(m).split("/")[0], m) for m in world.standin.top_level(CHANNEL)]


def _reopen_note(message: dict[str, Any]) -> bool:
    return str(message.get("text", "")).startswith(REOPEN_NOTE)


def _storm_cards(h: History) -> dict[str, set[str]]:
    """Incident id → its cards in a storm's thread, by their ``ts`` (issue 37: above the
    channel's rate an incident has no message of its own; its card is a reply under the
    storm's table). A card is the message the incident's chat points at; the same outbox
    item posted twice carries the same key, so each reply with that key counts."""
    with h.world.standin._cv:
        messages = dict(h.world.standin.messages)
    tables = _storm_tables(messages)
    replies = [(ts, m) for (c, ts), m in messages.items() if c == CHANNEL
               and m.get("thread_ts") in tables]
    out: dict[str, set[str]] = {}
    for incident_id, incident in h.incidents.items():
        chat = getattr(incident, "chat", None)
        card = messages.get((chat.channel, chat.ts)) if chat is not None else None
        if card is None or card.get("thread_ts") not in tables or not _key(card):
            continue
        out[incident_id] = {str(ts) for ts, m in replies if _key(m) == _key(card)}
    # an incident Redis lost with a wipe has no chat to point at its card: its card is its
    # first outbox item (``INC-n/1``, the card's post) among the storm's replies; an
    # incident re-opened on a lost one's card has no post of its own: its first item is the
    # note under that card ("The bot's store lost INC-79 …"), which is not a second card
    for ts, m in replies:
        owner, _, n = _key(m).partition("/")
        if n == "1" and owner not in h.incidents and not _reopen_note(m):
            out.setdefault(owner, set()).add(str(ts))
    return out


def _storm_tables(messages: dict[tuple[str, str], dict[str, Any]]) -> set[str]:
    """The ``ts`` of the storms' own messages (top level, posted under a ``storm-`` key)."""
    return {str(ts) for (c, ts), m in messages.items() if c == CHANNEL
            and not m.get("thread_ts") and _key(m).startswith("storm-")}


def _answered_once(h: History) -> Iterable[Violation]:
    posted = _posts(h.world)
    posts = Counter(owner for owner, _ in posted)
    storm = _storm_cards(h)
    for a in h.driver.armings:
        if not a.alert_answers or not 200 <= a.alert_answers[-1] < 300:
            yield Violation("answered", f"{a.fingerprint}: never answered 2xx "
                                        f"({a.alert_answers})")
        shown = _shown(h, posted, storm, set(a.incidents))
        if shown != 1 and a.incidents:
            yield Violation("answered", f"{a.fingerprint}: {shown} messages for incidents "
                                        f"{a.incidents}")
    lost = sum(1 for f in h.faults if f.kind == "redis_wipe")
    said = sum(n for owner, n in posts.items()  # a second replica's own list is not one
               if owner.startswith("data-loss-") and ALSO not in owner)
    if said > lost:
        yield Violation("answered", f"{said} data-loss announcements for {lost} wipes")


def _shown(h: History, posted: list[tuple[str, dict[str, Any]]],
           storm: dict[str, set[str]], ids: set[str]) -> int:
    """The messages that show these incidents, counted by ``ts``: the top-level ones they
    posted, their storm cards, the one an incident re-opened after a wipe took over
    (posted under the lost incident's key, the alert having folded into it), and the
    data-loss announcement that names one that closed before its card went out."""
    shown = {str(m.get("ts")) for owner, m in posted if owner in ids
             or (owner.startswith("data-loss-")
                 and ids & set(UNSHOWN_RE.findall(str(m.get("text", "")))))}
    cards = set().union(*storm.values()) if storm else set()
    known = {str(m.get("ts")) for _, m in posted} | cards
    took = _took_over(h, storm)
    for incident_id in ids:
        chat = getattr(h.incidents.get(incident_id), "chat", None)
        if chat is not None and chat.ts in known:
            shown.add(chat.ts)
        shown |= storm.get(incident_id, set())
        # a re-opened incident a later wipe took too has no record to read its chat from:
        # the note it posted names the message it took over
        shown |= took.get(incident_id, set()) & known
    return len(shown)


def _took_over(h: History, storm: dict[str, set[str]]) -> dict[str, set[str]]:
    """Re-opened incident → the message it took over, read from the note it posted in that
    message's thread ("The bot's store lost INC-72 (…). This incident is *INC-77* now …").
    The note's thread is the message itself, unless the message was a card in a storm's
    thread: the note then sits in the storm's thread too, and the message taken over is the
    lost incident's card there (or, when that one was itself re-opened on a card, the card
    it had taken over), not the storm's table."""
    with h.world.standin._cv:
        messages = dict(h.world.standin.messages)
    tables = _storm_tables(messages)
    notes: dict[str, tuple[str, str]] = {}  # new → (old, the note's thread)
    for m in messages.values():
        found = NOTE_RE.match(str(m.get("text", "")))
        if found is not None and m.get("thread_ts"):
            notes[found.group(2)] = (found.group(1), str(m["thread_ts"]))

    def card(new: str, depth: int = 0) -> set[str]:
        old, thread = notes[new]
        if thread not in tables:
            return {thread}
        if storm.get(old) or old not in notes or depth > len(notes):
            return set(storm.get(old, set()))
        return card(old, depth + 1)

    return {new: card(new) for new in notes}


# --- 2 ----------------------------------------------------------------------------------
def _last_heal_before(faults: list[Fault], t: float, host: str) -> float:
    """The last heal, up to ``t``, of a fault that could hold up an incident on ``host``
    (the rule the driver's bounds follow too: ``quiet_since``)."""
    return max((f.healed_wall for f in faults if f.started_wall <= t and f.holds_up(host)),
               default=0.0)


def _settled_in_time(h: History) -> Iterable[Violation]:
    every = RECONCILE["every_s"]
    end = time.time()
    for incident_id, incident in h.incidents.items():
        entries = [e for e in h.audits.get(incident_id, []) if e.action == "transition"]
        since = incident.first_seen
        state = IncidentState.OPEN
        for e in [*entries, None]:
            left = e.ts if e is not None else None
            if state in TRANSIENT:
                until = left if left is not None else end
                start = max(since, _last_heal_before(h.faults, until, incident.host))
                allowed = start + DEADLINE[state] + every + WORK_S
                if until > allowed:
                    yield Violation("settled", f"{incident_id} ({incident.host}) {state.value} "
                                               f"for {until - since:.0f}s, allowed "
                                               f"{allowed - since:.0f}s"
                                               + ("" if left else " (still in it)"))
            if e is not None:
                state, since = IncidentState(e.detail.get("to", state.value)), e.ts
    for a in h.driver.armings:
        if a.stuck:
            yield Violation("settled", f"{a.fingerprint}: {a.stuck}")


# --- 3 ----------------------------------------------------------------------------------
def _stops(world: World, host: str) -> list[float]:
    return [float(e["ts"]) for e in world.host(host).sim.command_log()
            if e.get("tool") == "systemctl" and e.get("argv", [])[:2] == ["stop", UNIT]]


def _ran_once(h: History) -> Iterable[Violation]:
    for incident_id, entries in h.audits.items():
        started = Counter(str(e.detail.get("approval_id", "")) for e in entries
                          if e.action == "action.started")
        for approval_id, n in started.items():
            if n > 1:
                yield Violation("ran_once", f"{incident_id}: approval {approval_id} "
                                            f"started {n} times")
    by_host: dict[str, list[Arming]] = {}
    for a in h.driver.armings:
        by_host.setdefault(a.host, []).append(a)
    for host, armings in by_host.items():
        stops = _stops(h.world, host)
        armings.sort(key=lambda a: a.armed_at)
        for n, a in enumerate(armings):
            until = armings[n + 1].armed_at if n + 1 < len(armings) else float("inf")
            ran = sum(1 for t in stops if a.armed_at <= t < until)
            if ran > max(a.approves, 0):
                yield Violation("ran_once", f"{a.fingerprint}: the unit was stopped {ran} "
                                            f"times for {a.approves} approvals")


# --- 4 ----------------------------------------------------------------------------------
def _no_false_word(h: History) -> Iterable[Violation]:
    """The first time each incident's message said each word, the host must not show the
    condition. (An identical edit sent again later, after the on-call armed the host for
    the next incident, repeats a word that was true when it was earned.)"""
    first: dict[tuple[str, str], Claim] = {}
    for claim in sorted(h.watch.claims, key=lambda c: c.at):
        first.setdefault((claim.incident or claim.text, claim.word), claim)
    for claim in first.values():
        if claim.holds:
            yield Violation("false_word", f"{claim.host} {claim.incident}: said {claim.word} "
                                          f"while the unit still held the GPUs: "
                                          f"{claim.text!r}")


# --- 5 ----------------------------------------------------------------------------------
def _no_500(h: History) -> Iterable[Violation]:
    for route, code in h.driver.answers:
        if code >= 500 and code != 503:
            yield Violation("no_500", f"{route} answered {code}")
    for serve in h.world.serves:
        for line in serve.log().splitlines():
            if "internal error" in line and " ERROR " in line:
                yield Violation("no_500", f"{serve.logfile.name}: {line[:240]}")


# --- 6 ----------------------------------------------------------------------------------
def _audit_whole(h: History) -> Iterable[Violation]:
    approvals = ApprovalStore(h.world.store.redis)
    for incident_id, incident in h.incidents.items():
        entries = h.audits.get(incident_id, [])
        state = IncidentState.OPEN.value
        for e in entries:
            if e.action != "transition":
                continue
            if e.detail.get("from") != state:
                yield Violation("audit", f"{incident_id}: a transition from "
                                         f"{e.detail.get('from')} follows one to {state}")
            state = str(e.detail.get("to"))
        if state != incident.state.value:
            yield Violation("audit", f"{incident_id}: is {incident.state.value}, its audit "
                                     f"ends at {state}")
        actions = {e.action for e in entries}
        for approval in approvals.for_incident(incident_id):
            want = {"approved": "approval.approved", "denied": "approval.denied"}.get(
                approval.status.value)
            if want is not None and want not in actions:
                yield Violation("audit", f"{incident_id}: approval {approval.id} is "
                                         f"{approval.status.value} without {want}")
    wiped = max((f.started_wall for f in h.faults if f.kind == "redis_wipe"), default=0.0)
    started: dict[str, list[float]] = {}
    for incident_id, entries in h.audits.items():
        host = h.incidents[incident_id].host
        started.setdefault(host, []).extend(e.ts for e in entries
                                            if e.action == "action.started")
    for world_host in h.world.hosts:
        for t in _stops(h.world, world_host.name):
            if t <= wiped + 1.0:
                continue  # its audit went with Redis's data
            if not any(t - 120.0 <= s <= t for s in started.get(world_host.name, [])):
                yield Violation("audit", f"{world_host.name}: a stop at {t:.1f} has no "
                                         f"action.started before it")


# --- 7 ----------------------------------------------------------------------------------
def _owed_delivered(h: History) -> Iterable[Violation]:
    for owner, purposes in sorted(h.owed.items()):
        kinds = Counter(p.split(":")[0] for p in purposes)  # "reply:3fa2…" → "reply"
        said = ", ".join(f"{k} × {n}" if n > 1 else k for k, n in kinds.items())
        items = "item" if len(purposes) == 1 else "items"
        yield Violation("owed", f"{owner}: {len(purposes)} chat {items} still queued after "
                                f"the final wait ({said})")
