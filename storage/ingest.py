"""The batch writer behind ``IncidentStore.ingest``: snapshot under WATCH, write in one go.

1. WATCH the string keys a batch depends on (dedup markers, (host, kind) and fingerprint
   indexes, group windows) and read them with one MGET (silences too, unwatched).
2. WATCH the incident hashes they point to and read their core fields in one call.
3. Plan (pure, ``bot/domain/planner.py``).
4. MULTI, one EVAL that applies every write, EXEC. If another replica touched a watched
   key, EXEC fails and the caller plans again from fresh data.

The writes go as one script call instead of ~100 commands: the same atomicity, one
append-only-file fsync, and far less client time than packing each command.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import cast

from redis import Redis
from redis.client import Pipeline

from bot.domain.approval import Resolver
from bot.domain.incident import (
    Alert,
    AlertStatus,
    GroupWindow,
    Incident,
    SilenceRule,
    flat,
    silence_candidates,
)
from bot.domain.lifecycle import IncidentState, is_transient
from bot.domain.maintenance import windows_from_json
from bot.domain.planner import Plan, View
from storage import keys
from storage.approvals import (
    RETENTION_S,
    Withdrawal,
    resolver_marker,
    watch_pending,
    withdraw_in,
)
from storage.audit import GLOBAL_MAXLEN, entry_fields
from storage.events import MAXLEN as EVENTS_MAXLEN
from storage.events import event_fields
from storage.inflight import Inflight

SEEN_TTL_S = 7 * 86400  # how long a delivery stays "already applied"
# What ingest decisions read. Labels, details, and summary are never read on the
# hot path (a fold overwrites or keeps them), and only changed fields are written, so
# the flow's parts are never clobbered.
# xids: an Xid storm's tally, folded here; chat: not used by the planner, but each record
# an ingest writes is told to the data-loss watch (``IncidentStore.written``), which took one
# without it for an incident whose message never went out (chaos seed 4242, INC-291)
CORE_FIELDS = ("id", "host", "kind", "state", "severity", "count", "first_seen", "last_seen",
               "updated", "resolved_at", "cleared_at", "source", "parent_id", "hosts",
               "fingerprints", "schema", "xids", "chat")
_HMGET_MANY = """
local out = {}
for i, k in ipairs(KEYS) do out[i] = redis.call('HMGET', k, unpack(ARGV)) end
return out
"""
# ARGV is a flat list of: command, key index (into KEYS), argument count, arguments...
_APPLY = """
local i = 1
while i <= #ARGV do
  local n = tonumber(ARGV[i + 2])
  redis.call(ARGV[i], KEYS[tonumber(ARGV[i + 1])], unpack(ARGV, i + 3, i + 2 + n))
  i = i + 3 + n
end
return 1
"""


class BatchKeys:
    """The string keys a batch reads with one MGET, in a fixed order."""

    def __init__(self, alerts: Sequence[Alert]) -> None:
        self.seen = sorted({a.dedup_key for a in alerts if a.dedup_key})
        self.pairs = sorted({(a.host, a.kind) for a in alerts})
        self.fps = sorted({a.fp for a in alerts})
        self.kinds = sorted({a.kind for a in alerts})
        firing = {(a.host, a.kind) for a in alerts if a.status is AlertStatus.FIRING}
        self.silences = sorted({s for h, k in firing for s in silence_candidates(h, k)})
        self.watched = ([keys.alert_seen(s) for s in self.seen]
                        + [keys.incident_by_host_kind(h, k) for h, k in self.pairs]
                        + [keys.alert_incident(f) for f in self.fps]
                        + [keys.group(k) for k in self.kinds])
        self.all = self.watched + [keys.silence(h, k) for h, k in self.silences]
        if firing:
            self.all.append(keys.maintenance())

    def view(self, values: list[str | None]) -> View:
        it = iter(values)
        view = View()
        view.seen = {s for s in self.seen if next(it) is not None}
        view.open_ids = {p: v for p in self.pairs if (v := next(it))}
        view.fp_ids = {f: v for f in self.fps if (v := next(it))}
        view.windows = {k: GroupWindow.from_json(v) for k in self.kinds if (v := next(it))}
        view.silences = {s: SilenceRule.from_json(v) for s in self.silences if (v := next(it))}
        view.maintenance = windows_from_json(next(it, None))
        return view


class IdBlocks:
    """Incident numbers reserved in blocks with one INCRBY (one fsync per block, not per
    batch). Unique across replicas; numbers a replica never uses are skipped, not reused.

    A counter that went backwards (Redis restarted without its data) would hand out numbers
    old messages still name (issue 39's chaos run: two incidents INC-1 in one channel, an
    old button acting on a new incident): the block is then taken past the highest number
    this replica reserved plus ``margin`` (other replicas' blocks since), as the data-loss
    watch raises the counter, only sooner: before the watch's next period. ``floor`` is the
    highest counter this process has seen in Redis (``saw``, from the data-loss watch): a
    replica that reserved no block before the wipe (one just started) would otherwise take
    INC-1… from the emptied counter (seed 9's chaos run: INC-1 on two hosts' messages)."""

    def __init__(self, redis: Redis, size: int = 64, margin: int = 1000) -> None:
        self.redis = redis
        self.size = size
        self.margin = margin
        self.lock = threading.Lock()
        self.next = self.end = 0
        self.floor = 0

    def saw(self, counter: int) -> None:
        """The incident counter as this process last read it from Redis."""
        with self.lock:
            self.floor = max(self.floor, counter)

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        with self.lock:
            if self.next >= self.end:
                top = int(cast(int, self.redis.incrby(keys.incident_seq(), self.size)))
                high = max(self.end - 1, self.floor)
                if high > 0 and top - self.size < high:  # went back: data lost
                    past = high + self.margin + self.size - top
                    top = int(cast(int, self.redis.incrby(keys.incident_seq(), past)))
                self.next, self.end = top - self.size + 1, top + 1
            number, self.next = self.next, self.next + 1
        return f"INC-{number}"


def read_view(pipe: Pipeline, alerts: Sequence[Alert]) -> View:
    """Steps 1 and 2: the snapshot the planner decides on, every key in it watched."""
    batch = BatchKeys(alerts)
    pipe.watch(*batch.watched)
    view = batch.view(cast(list[str | None], pipe.mget(batch.all)))
    ids = sorted({*view.open_ids.values(), *view.fp_ids.values(),
                  *(w.parent_id for w in view.windows.values())})
    if not ids:
        return view
    names = [keys.incident(i) for i in ids]
    pipe.watch(*names)
    rows = cast(list[list[str | None]], pipe.eval(_HMGET_MANY, len(names), *names, *CORE_FIELDS))
    for incident_id, row in zip(ids, rows, strict=True):
        if row and row[0]:
            raw = {f: v for f, v in zip(CORE_FIELDS, row, strict=True) if v is not None}
            view.incidents[incident_id] = Incident.from_hash(raw)
    return view


class Writes:
    """Commands collected for the one ``_APPLY`` call."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.index: dict[str, int] = {}
        self.argv: list[str] = []

    def op(self, command: str, key: str, *args: object) -> None:
        if key not in self.index:
            self.keys.append(key)
            self.index[key] = len(self.keys)
        self.argv += [command, str(self.index[key]), str(len(args)), *map(str, args)]

    def xadd(self, key: str, fields: dict[str, str], maxlen: int) -> None:
        self.op("XADD", key, "MAXLEN", "~", maxlen, "*", *(x for kv in fields.items() for x in kv))

    def set_or_delete(self, key: str, value: str | None) -> None:
        if value is None:
            self.op("DEL", key)
        else:
            self.op("SET", key, value)


def write_plan(pipe: Pipeline, plan: Plan, view: View, now: float,
               open_deadline_s: float = 120.0) -> None:
    """Step 4: every write of the plan in one MULTI/EVAL/EXEC (raises WatchError)."""
    w = Writes()
    _incidents(w, plan, view)
    _inflight(w, plan, view, now + open_deadline_s)
    _indexes(w, plan, now)
    for event in plan.events:
        w.xadd(keys.incident_events(), event_fields(event.kind, event.incident_id,
                                                    dict(event.fields)), EVENTS_MAXLEN)
    for note in plan.notes:
        fields = entry_fields(note.incident_id, note.actor, note.action, note.detail, None, now)
        if note.incident_id:  # a note about no incident (a suppressed alert): global only
            w.op("XADD", keys.audit(note.incident_id), "*",
                 *(x for kv in fields.items() for x in kv))
        w.xadd(keys.audit_all(), fields, GLOBAL_MAXLEN)
    resolved = {i: Withdrawal(by, Resolver.ALERT, now)
                for i, by in _resolved_by_alert(plan, view).items()}
    for incident_id, why in resolved.items():
        w.op("SET", keys.approvals_resolver(incident_id), resolver_marker(why), "EX",
             RETENTION_S)
    pending = watch_pending(pipe, resolved)
    pipe.multi()
    if w.argv:
        pipe.eval(_APPLY, len(w.keys), *w.keys, *w.argv)
    for incident_id, approval_ids in pending.items():
        withdraw_in(pipe, incident_id, approval_ids, resolved[incident_id])
    pipe.execute()


def _resolved_by_alert(plan: Plan, view: View) -> dict[str, str]:
    """{incident id: the alert source that resolved it} for incidents this batch resolves:
    their pending approvals are withdrawn in the same EXEC (issue 25)."""
    sources = {n.incident_id: n.actor for n in plan.notes if n.action == "transition"}
    out: dict[str, str] = {}
    for incident in plan.incidents.values():
        before = view.incidents.get(incident.id)
        if before is not None and before.is_open and incident.state is IncidentState.RESOLVED:
            out[incident.id] = sources.get(incident.id) or incident.source or "alert"
    return out


def _incidents(w: Writes, plan: Plan, view: View) -> None:
    for incident in plan.incidents.values():
        before = view.incidents.get(incident.id)
        fields = incident.to_hash() if before is None else _changed(before, incident)
        if fields:
            w.op("HSET", keys.incident(incident.id), *(x for kv in fields.items() for x in kv))
        if before is None or before.is_open != incident.is_open:
            w.op("SADD" if incident.is_open else "SREM", keys.incidents_open(), incident.id)
    for incident_id in plan.created:
        w.op("ZADD", keys.incidents_all(), plan.incidents[incident_id].first_seen, incident_id)


def _inflight(w: Writes, plan: Plan, view: View, deadline: float) -> None:
    """A new incident is in flight (open, released: the flow consumer claims it) until
    ``deadline``; one this batch resolved from a transient state is no longer."""
    for incident in plan.incidents.values():
        before = view.incidents.get(incident.id)
        if before is None and is_transient(incident.state):
            entry = Inflight(incident.id, incident.state, "", deadline)
            w.op("HSET", keys.incident_owner(incident.id),
                 *(x for kv in entry.to_hash().items() for x in kv))
            w.op("ZADD", keys.incidents_inflight(), repr(deadline), incident.id)
        elif before is not None and is_transient(before.state) and not is_transient(
                incident.state):
            w.op("DEL", keys.incident_owner(incident.id))
            w.op("ZREM", keys.incidents_inflight(), incident.id)


def _changed(before: Incident, after: Incident) -> dict[str, str]:
    """The hash fields that differ, compared as values and only those serialised: a fold
    changes a count and two times, and serialising every label and detail of both sides
    to find that out was a fifth of a storm write's time. Same result as diffing
    ``to_hash()`` of both (tests/unit/test_ingest_changed.py)."""
    old, new = before.to_dict(), after.to_dict()
    return {k: flat(v) for k, v in new.items() if old.get(k) != v}


def _indexes(w: Writes, plan: Plan, now: float) -> None:
    for (host, kind), value in plan.open_keys.items():
        w.set_or_delete(keys.incident_by_host_kind(host, kind), value)
    for fp, value in plan.fp_index.items():
        w.set_or_delete(keys.alert_incident(fp), value)
    for kind, window in plan.windows.items():
        ttl_ms = max(1, int((window.until - now) * 1000))
        w.op("SET", keys.group(kind), window.to_json(), "PX", ttl_ms)
    for seen in plan.seen:
        w.op("SET", keys.alert_seen(seen), "1", "EX", SEEN_TTL_S)
    for parent, child in plan.children:
        w.op("SADD", keys.incident_children(parent), child)
