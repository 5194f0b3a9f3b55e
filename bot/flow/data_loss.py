"""When Redis loses the bot's data: notice, say so once, read the open work back (issue 39).

Redis restarted without its volume, or a failover to an empty replica, and the bot's
state is gone while Redis answers as if all were well: the next alert got 200 and was never
posted, the consumer group was gone, and nothing said so. Each replica keeps the epoch it
joined (``storage/epoch.py``) and, every reconciler period, a snapshot of the open
incidents and the highest incident number; ``check`` compares them with Redis:

- the epoch gone or new: the data was wiped; the incident counter below what it saw: a
  failover to a replica that was behind (the incidents missing from Redis were lost);
- then the counter is raised past every number handed out (old messages' buttons name
  them), and the one replica that wins the announcement for the lost epoch says so in the
  channel, once: which open incidents it lost track of and what each was doing (an action
  sent to a host, an approval waiting), and re-opens each top-level one from its alert,
  taking over its old message (``IncidentStore.ingest(chats=…)``, handed in as ``opens``:
  the alert receiver's own path, so its ``incident.opened`` event reaches the flow's
  consumer and runner as an alert's does), so the host is diagnosed again: what the host
  shows now is what the message will say. One whose message no record knew (its card's
  post was in flight at the loss: Slack acted on it, the answer never came) is re-opened
  with a lead to it (``Incident.lost_card``, ``lost_cards``): the new card's first post
  looks in the channel for the old card by its outbox key and edits it instead of posting
  a second message for the alert (``bot/chat/outbox.py``; chaos seed 4242: INC-5837).

Between snapshots the watch is told every incident record this process commits, as it
commits it (``seen``, wired to ``Stores.on_incident_written``: in memory, no Redis), so an
incident opened a moment before the wipe is known too: re-opened with its message taken
over, not opened again by Alertmanager's repeat under a second message. Each replica knows
the incidents in Redis at its last snapshot and those it wrote since; an incident another
replica opened after this one's snapshot is that replica's to re-open: every replica that
notices the loss re-opens the lost incidents it knows (a second re-open of the same alert
folds into the first), and only the announcer's channel message lists them; each re-opened
incident says so in its own thread.

Every replica reads the epoch each second (``run_forever``: one GET) and checks at once
when it moved, so each notices a wipe within a second of Redis answering again and re-opens
what it knew before Alertmanager's next repeat (15 s here) opens it anew; the events
stream's NOGROUP triggers a check too (``IncidentEvents.on_lost_group``: only the first
replica to meet it does, as it makes the group again), and the reconciler's loop runs one
every period (the full comparison: a roll-back keeps the epoch).

An incident can also close while its card still waits in the chat outbox (Slack's channel
budget held it back, and the on-call fixed the host by hand): a wipe then takes the card
with the incident, and nothing ever showed it. ``seen`` also remembers each incident that
closed without a message (``chat`` unset), until a committed record of it has one (this
process's outbox delivered it, or each period's check reads it back with one: another
replica's did), or for ``UNSHOWN_KEEP_S`` (at most ``UNSHOWN_KEPT`` of them, the oldest
forgotten first). The announcement names those a loss took, one line each: their state is
known and final, so they are not re-opened (chaos seed 4242: INC-4705, issue 39). Only the
replica that committed such a close remembers it; one that did not announce names those
it alone knew in a message of its own (``DATA_LOSS_ALSO``), each incident named once
whichever replicas knew it (``EpochStore.first_to_tell``; INC-312). Nor is one named
whose card another replica's outbox delivered (a wipe can take the record of that a moment
after): each replica remembers the cards it delivered (``card_out``, told by the flow's
``CardDeliveries`` in memory), pools them under the lost epoch as it notices the loss, and
the one naming waits a poll for the pool (INC-296).
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from enum import StrEnum

from bot.chat.base import ChatMessage, Section
from bot.chat.text import escape, mention
from bot.core import metrics, strings
from bot.core.errors import log_internal
from bot.domain.incident import RECOVERED, Alert, Incident
from bot.domain.incident_record import LostCard
from bot.domain.lifecycle import ACTING, IncidentState
from bot.domain.planner import PlanOutcome
from bot.flow.message import Publisher
from storage.audit import AuditLog
from storage.chat_outbox import Op
from storage.connection import refusal
from storage.epoch import Epoch, EpochStore
from storage.incidents import IncidentStore, Opens
from storage.inflight import step_owner

log = logging.getLogger(__name__)
ACTOR = "incident-bot"
ID_MARGIN = 1000  # numbers other replicas reserved after our last look are skipped too
PURPOSE = "data-loss"
POLL_S = 1.0  # how often each replica reads the epoch (one GET)
QUIET_STEP_S = 0.1  # a waiting ingest looks again this often (the re-open may end sooner)
CHATLESS_WAIT_S = 3.0  # a lost incident known without its message waits for a peer's re-open
UNSHOWN_KEEP_S = 600.0  # a closed incident without its message is remembered this long
UNSHOWN_KEPT = 100  # and at most this many (one announcement line each)
CARDS_KEPT = 2000  # cards this process delivered, remembered as long (the newest kept)
SHOWN_WAIT_S = POLL_S + 1.0  # every replica notices a loss within a poll and pools its cards
INCIDENT_FIELDS = frozenset(f.name for f in dataclass_fields(Incident))
ALSO = "-also-"  # a second replica's own list, in its key after the announcement's


class LossKind(StrEnum):
    WIPED = "wiped"
    ROLLED_BACK = "rolled_back"


@dataclass(frozen=True)
class Loss:
    """What one check found: how the data went, the open incidents lost, and the incident
    each was re-opened as (by the replica that announced it)."""

    kind: LossKind
    lost: tuple[Incident, ...]
    reopened: dict[str, str] = field(default_factory=dict)  # old id → new id
    announced: bool = False
    unshown: tuple[Incident, ...] = ()  # closed before their message went out, now gone


class DataLossWatch:
    """One replica's memory of the data (epoch, open incidents, highest number) and the
    check against Redis; thread-safe (the reconciler and the consumer both call it)."""

    def __init__(self, epochs: EpochStore, incidents: IncidentStore, audit: AuditLog,
                 publisher: Publisher, *, opens: Opens, clock: Callable[[], float] = time.time,
                 reopen: bool = True, chatless_wait_s: float = CHATLESS_WAIT_S,
                 shown_wait_s: float = SHOWN_WAIT_S) -> None:
        self.epochs = epochs
        self.incidents = incidents  # read only: what is open, what is gone
        self.opens = opens  # a lost incident re-opened the alert receiver's way
        self.audit = audit
        self.publisher = publisher
        self.clock = clock
        self.reopen = reopen
        self.chatless_wait_s = chatless_wait_s
        self.shown_wait_s = shown_wait_s  # for the other replicas' delivered cards
        self.epoch: Epoch | None = None
        self.counter = 0
        self.open: dict[str, Incident] = {}
        self.unshown: dict[str, tuple[Incident, float]] = {}  # closed, no message: since when
        self.cards: dict[str, float] = {}  # cards this process's outbox delivered: when
        self._lock = threading.Lock()  # one check at a time
        self._known = threading.Lock()  # ``open``/``counter`` against ``seen`` (never held on I/O)
        self._since: dict[str, Incident] | None = None  # what ``seen`` told during a snapshot
        self._quiet_until = 0.0  # ingests wait for the other replicas' re-opens until then
        self._reopening = threading.local()  # the re-opening thread's own ingests never wait

    def start(self) -> Epoch:
        """Join the epoch in Redis (begin one on empty data) and take the first snapshot."""
        with self._lock:
            self.epoch = self.epochs.begin()
            self._snapshot()
            return self.epoch

    def check(self) -> Loss | None:
        """Compare Redis with what this replica knew; a ``Loss`` when the data is gone."""
        with self._lock:
            if self.epoch is None:
                self.epoch = self.epochs.begin()
            now_epoch = self.epochs.read()
            counter = self.epochs.incident_counter()
            with self._known:
                known = tuple(self.open.values())
                unshown = self._unshown_now()
            if now_epoch is None or now_epoch.id != self.epoch.id:
                return self._lost(LossKind.WIPED, self.epoch, counter, known, unshown)
            current = self._listing()
            vanished = tuple(i for i in known if i.id not in current
                             and self.incidents.get(i.id) is None)
            if counter < self.counter or vanished:
                return self._lost(LossKind.ROLLED_BACK, self.epoch, counter, vanished, unshown)
            self._snapshot(counter, current)
            self._shown_since(unshown)
            return None

    def seen(self, incident: Incident, fields: Sequence[str] = ()) -> None:
        """An incident record this process just committed (``Stores.on_incident_written``):
        known from now on, not from the next snapshot. In memory only; never waits on a
        check in progress. ``fields``: the only ones the record carries (an ingest's fold
        reads a few); the rest are kept from what was known (the running action, the
        summary and labels a re-open is made from)."""
        with self._known:
            record = _over(self.open.get(incident.id), incident, fields)
            _learn(self.open, record)
            self._learn_unshown(record)
            if self._since is not None:
                self._since[record.id] = record
            self.counter = max(self.counter, _id_number(record.id))

    def card_out(self, incident_id: str) -> None:
        """This process's outbox delivered the incident's card (``CardDeliveries``): in
        memory, before Redis records it, so a wipe a moment later cannot take this."""
        with self._known:
            self.unshown.pop(incident_id, None)
            self.cards[incident_id] = self.clock()
            while len(self.cards) > CARDS_KEPT:
                self.cards.pop(next(iter(self.cards)))

    def _cards_now(self) -> list[str]:
        """The cards this process delivered in the last ``UNSHOWN_KEEP_S``."""
        cutoff = self.clock() - UNSHOWN_KEEP_S
        with self._known:
            return [i for i, at in self.cards.items() if at >= cutoff]

    def moved(self) -> bool:
        """Whether the epoch in Redis is no longer the one this replica joined (one GET)."""
        now = self.epochs.read()
        return self.epoch is not None and (now is None or now.id != self.epoch.id)

    def current(self) -> None:
        """Before an alert is ingested (``Stores.before_incident_ingest``): when the epoch
        moved, the check first, so a lost incident is re-opened on its message and the
        alert folds into it instead of opening it anew (a delivery Alertmanager retried
        while Redis was down lands the moment it is back, before the next epoch read). The
        replica that takes the delivery may not know the incident (the other one opened it).
        So after a loss, whichever thread found it (the epoch poller, most often), ingests
        wait while this replica re-opens what it knew, then ``chatless_wait_s`` and a poll
        more for the other replicas to re-open what they knew: an alert let through
        meanwhile opened a lost incident anew, its card a second message, and the re-open
        folded into it (chaos seed 4242, INC-5840)."""
        if getattr(self._reopening, "on", False):
            return  # this thread's own re-open of a lost incident
        if self.moved():
            self.check()
        while (wait := self._quiet_until - time.monotonic()) > 0:
            time.sleep(min(wait, QUIET_STEP_S))

    def run_forever(self, stop: threading.Event, every_s: float = POLL_S) -> None:
        """Each ``every_s``: a check when the epoch moved. Redis away or refusing: next time."""
        while not stop.wait(every_s):
            try:
                if self.moved():
                    self.check()
            except Exception as exc:
                if refusal(exc) is None:
                    log_internal(exc, "data-loss watch")

    def lost_group(self, group: str) -> None:
        """The events stream's consumer group was gone (``on_lost_group``): check now."""
        log.warning("consumer group %r was gone from Redis: checking for a data loss", group)
        self.check()

    # --- closed before their message went out ---------------------------------------
    def _learn_unshown(self, record: Incident) -> None:
        """Under ``_known``: a closed top-level record without a message is remembered (the
        newest last); one with its message, or open, is not. A grouped host's message is
        its parent's."""
        self.unshown.pop(record.id, None)
        if record.is_open or record.chat is not None or record.parent_id is not None:
            return
        self.unshown[record.id] = (record, self.clock())
        while len(self.unshown) > UNSHOWN_KEPT:
            self.unshown.pop(next(iter(self.unshown)))

    def _unshown_now(self) -> tuple[Incident, ...]:
        """Under ``_known``: the remembered ones, those older than ``UNSHOWN_KEEP_S`` dropped."""
        cutoff = self.clock() - UNSHOWN_KEEP_S
        for incident_id in [i for i, (_, at) in self.unshown.items() if at < cutoff]:
            del self.unshown[incident_id]
        return tuple(record for record, _ in self.unshown.values())

    def _shown_since(self, unshown: tuple[Incident, ...]) -> None:
        """Each period, the remembered ones read back (one round trip): another replica's
        outbox may have delivered the message, which this process is never told."""
        if not unshown:
            return
        shown = {i.id for i in self.incidents.get_many([i.id for i in unshown])
                 if i.chat is not None}
        with self._known:
            for incident_id in shown:
                self.unshown.pop(incident_id, None)

    # --- a loss -----------------------------------------------------------------------
    def _lost(self, kind: LossKind, lost_epoch: Epoch, seen_counter: int,
              known: tuple[Incident, ...], unshown: tuple[Incident, ...] = ()) -> Loss:
        # a roll-back keeps the epoch: a new one marks it, so each loss is one epoch lost
        self.epoch = self.epochs.begin() if kind is LossKind.WIPED \
            else self.epochs.rotate(lost_epoch)
        self.epochs.raise_counter(self.counter + ID_MARGIN)
        noticed = time.monotonic()
        self.epochs.pool_shown(lost_epoch, self._cards_now())  # for the other replicas
        gone = tuple(i for i in known if self.incidents.get(i.id) is None)
        # a closed one still in Redis (a roll-back) may yet have its message delivered
        still = {i.id for i in self.incidents.get_many([i.id for i in unshown])} \
            if unshown else set()
        untold = tuple(i for i in unshown if i.id not in still)
        with self._known:
            for incident in untold:  # named once, with this loss
                self.unshown.pop(incident.id, None)
        metrics.DATA_LOSSES.labels(kind=kind.value).inc()
        log.error("Redis lost the bot's data (%s): epoch %s, incident counter %d (seen %d); "
                  "%d open incidents gone: %s", kind.value, lost_epoch.id, seen_counter,
                  self.counter, len(gone), ", ".join(i.id for i in gone) or "none")
        # one announcement per lost epoch, whichever replicas notice it
        # every replica re-opens what it knew (the others may not have known it); one says so
        announces = self.epochs.claim_announcement(lost_epoch, step_owner())
        reopened = self._reopening_quietly(gone) if self.reopen else {}
        untold = self._never_shown(lost_epoch, untold, noticed)
        loss = Loss(kind, gone, reopened, announced=announces, unshown=untold)
        if announces:
            self._announce(loss, reopened, lost_epoch.id)
        elif untold:
            self._also(untold, lost_epoch.id)
        self._snapshot()
        return loss

    def _never_shown(self, lost_epoch: Epoch, untold: tuple[Incident, ...],
                     noticed: float) -> tuple[Incident, ...]:
        """Of the closed incidents this replica knew without a message, those to name:
        not one whose card another replica's outbox delivered (it pools those it delivered
        as it notices the loss, within a poll: this waits for that, ``SHOWN_WAIT_S`` from
        ``noticed``), and each by one replica only (whichever asks first). Chaos seed 4242 at
        59b746e, INC-296: one replica closed it, the other delivered its card half a second
        before a wipe, and the announcement named it as closed before its message went
        out: a second message, and a false one."""
        if not untold:
            return ()
        wait = noticed + self.shown_wait_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        shown = self.epochs.shown(lost_epoch, [i.id for i in untold])
        first = set(self.epochs.first_to_tell(
            lost_epoch, [i.id for i in untold if i.id not in shown]))
        return tuple(i for i in untold if i.id in first)

    def _reopening_quietly(self, gone: tuple[Incident, ...]) -> dict[str, str]:
        """``_reopen`` with this replica's ingests held until it is done, then for
        ``chatless_wait_s`` and a poll more: the other replicas notice within a poll and
        re-open what they knew, the ones without a message after their own wait."""
        self._quiet_until = math.inf
        self._reopening.on = True
        try:
            return self._reopen(gone)
        finally:
            self._reopening.on = False
            self._quiet_until = time.monotonic() + self.chatless_wait_s + POLL_S

    def _reopen(self, gone: tuple[Incident, ...]) -> dict[str, str]:
        """Each lost top-level incident re-opened from its alert (its group's hosts too),
        taking over its old message: diagnosed again from the host. Every replica re-opens
        what it knew; one that knew an incident only without its message (another
        replica's outbox delivered it) waits ``chatless_wait_s`` for that replica to
        re-open it on its message first."""
        out: dict[str, str] = {}
        ordered = sorted(gone, key=lambda i: i.chat is None)
        for n, old in enumerate(ordered):
            if old.chat is None and (n == 0 or ordered[n - 1].chat is not None):
                # the replica that delivered its message knows where it is: let it re-open
                # it first (this alert then folds into it), else one with no message
                time.sleep(self.chatless_wait_s)
            if old.parent_id is not None:
                continue  # a grouped host comes back with its parent's hosts
            alerts = [_alert(old, host) for host in (old.hosts or (old.host,))]
            chats = {alerts[0].fp: old.chat} if old.chat is not None else {}
            # its card's ts never recorded (its post in flight at the loss, the answer lost):
            # the new card looks for it in the channel before posting one (INC-5837)
            lost = {alerts[0].fp: LostCard(old.id, old.first_seen)} if old.chat is None else {}
            try:
                result = self.opens(alerts, chats=chats, lost_cards=lost)
            except Exception as exc:  # Redis refused again: the announcement says so
                log.warning("re-opening %s after the data loss failed: %s", old.id, exc)
                continue
            outcome, new = result.outcomes[0]
            if new is None or outcome is not PlanOutcome.CREATED:
                continue  # another replica re-opened it first: this alert folded into it
            out[old.id] = new
            self.audit.append(new, ACTOR, "incident.recovered",
                              {"was": old.id, "state": old.state.value,
                               "running": old.running.kind if old.running else ""})
            self._thread_note(old, new)
        return out

    def _thread_note(self, old: Incident, new: str) -> None:
        incident = self.incidents.get(new)
        if incident is not None and incident.chat is not None:
            self.publisher.reply(incident, strings.DATA_LOSS_THREAD.format(
                old=old.id, new=new, state=_state(old)), purpose=PURPOSE)

    def _announce(self, loss: Loss, reopened: dict[str, str], which: str) -> None:
        """The one channel message (through the outbox: Slack may be down too) and its
        audit entry, under an id of its own."""
        how = strings.DATA_LOSS_WIPED if loss.kind is LossKind.WIPED \
            else strings.DATA_LOSS_ROLLED_BACK
        lines = [strings.DATA_LOSS_HEAD.format(how=how)]
        if not loss.lost:
            lines.append(strings.DATA_LOSS_NOTHING)
        else:
            n = len(loss.lost)
            lines.append(strings.DATA_LOSS_LOST.format(n=n, s="" if n == 1 else "s"))
            lines += [_line(i, reopened) for i in loss.lost]
        sections = [Section("\n".join(lines))]
        if loss.unshown:  # a section of its own: each section is clipped at Slack's limit
            sections.append(_unshown_section(strings.DATA_LOSS_UNSHOWN, loss.unshown))
        key = announcement_key(which)
        self.audit.append(key, ACTOR, "data.lost", {
            "kind": loss.kind.value, "lost": [i.id for i in loss.lost], "reopened": reopened,
            "unshown": [i.id for i in loss.unshown]})
        self._post(key, sections)

    def _also(self, unshown: tuple[Incident, ...], which: str) -> None:
        """A replica that did not announce the loss, but alone knew of incidents that closed
        before their message went out (it committed their close; the announcer never saw
        them): a message of its own names them, so each is shown once (chaos seed 4242:
        INC-312, issue 39)."""
        key = f"{announcement_key(which)}{ALSO}{secrets.token_hex(4)}"
        self.audit.append(key, ACTOR, "data.lost.also", {"unshown": [i.id for i in unshown]})
        self._post(key, [_unshown_section(strings.DATA_LOSS_ALSO, unshown)])

    def _post(self, key: str, sections: list[Section]) -> None:
        """Through the outbox: Slack may be down too."""
        text = "\n".join(s.text for s in sections)
        self.publisher.outbox.send(key, PURPOSE, Op.POST,
                                   ChatMessage(text=text, sections=tuple(sections)),
                                   self.publisher.channel)

    def _snapshot(self, counter: int | None = None,
                  current: dict[str, Incident] | None = None) -> None:
        current = self._listing() if current is None else current
        top = max((_id_number(i) for i in current), default=0)
        seen = self.epochs.incident_counter() if counter is None else counter
        with self._known:
            self.open = current
            self.counter = max(self.counter, seen, top)
        self.incidents.ids.saw(self.counter)  # never handed out again, even before our check

    def _listing(self) -> dict[str, Incident]:
        """The open incidents in Redis now, plus what ``seen`` told while they were read
        (a record committed after the listing is newer than the listing's)."""
        with self._known:
            self._since = {}
        try:
            current = {i.id: i for i in self.incidents.list(open_only=True)}
        finally:
            with self._known:
                since, self._since = self._since or {}, None
        for record in since.values():
            _learn(current, record)
        return current


def _over(known: Incident | None, told: Incident, fields: Sequence[str]) -> Incident:
    """``told`` whole, or its ``fields`` over what was ``known`` of the same incident."""
    if not fields or known is None:
        return told
    return replace(known, **{f: getattr(told, f) for f in fields if f in INCIDENT_FIELDS})


def _learn(known: dict[str, Incident], record: Incident) -> None:
    """``record`` into ``known``: kept while open, forgotten once closed."""
    if record.is_open:
        known[record.id] = record
    else:
        known.pop(record.id, None)


def announcement_key(epoch_id: str) -> str:
    """The outbox key of the one announcement of the loss of ``epoch_id``."""
    return f"data-loss-{epoch_id.replace(':', '-')}"


def _unshown_section(head: str, unshown: tuple[Incident, ...]) -> Section:
    return Section("\n".join([head] + [
        strings.DATA_LOSS_UNSHOWN_LINE.format(
            id=i.id, host=escape(i.host), kind=escape(i.kind), state=_state(i))
        for i in unshown]))


def _alert(old: Incident, host: str) -> Alert:
    """The alert that opened ``old`` (its first fingerprint keeps a later resolve working)."""
    first = host == old.host
    return Alert(source=RECOVERED, host=host, kind=old.kind, summary=old.summary if first else "",
                 severity=old.severity, labels=dict(old.labels) if first else {},
                 details=dict(old.details) if first else {},
                 fingerprint=old.fingerprints[0] if first and old.fingerprints else "")


def _state(incident: Incident) -> str:
    return incident.state.value.replace("_", " ")


def _line(incident: Incident, reopened: dict[str, str]) -> str:
    what = ""
    if incident.running is not None and incident.state in ACTING:
        who = mention(incident.running.by) if incident.running.by else "someone"
        what = strings.DATA_LOSS_RUNNING.format(kind=escape(incident.running.kind), who=who)
    elif incident.state is IncidentState.AWAITING_APPROVAL:
        what = strings.DATA_LOSS_WAITING
    new = reopened.get(incident.id)
    tail = strings.DATA_LOSS_NEW.format(new=new) if new else ""
    return strings.DATA_LOSS_LINE.format(id=incident.id, host=escape(incident.host),
                                         kind=escape(incident.kind), state=_state(incident),
                                         what=what) + tail


def _id_number(incident_id: str) -> int:
    tail = incident_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0

