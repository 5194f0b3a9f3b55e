"""The incident repository on Redis. Decisions are the planner's; storage only reads a
consistent snapshot and writes the result atomically.

One batch (``storage/ingest.py``) = WATCH the keys it depends on, read them, WATCH the
incident hashes they point to, read those, plan (pure), then MULTI/EXEC every write:
incident hashes, the (host, kind) and fingerprint indexes, the group window, the dedup
markers, the audit entries and the events. If another replica touched any watched key,
EXEC fails and the batch is planned again from fresh data, so two ``serve`` replicas
behave as one. Transitions and ``update`` WATCH the incident hash the same way.

A transition into a transient state (open, diagnosing, approved, remediating) writes its
owner and deadline (``storage/inflight.py``) in the same MULTI, the transition out removes
them; re-entering the same transient state is a claim on the step, allowed only to its own
owner or once the owner is gone (issue 24). ``redrive``, ``give_up`` and ``take_over`` are
the reconciler's writes, each done only if the entry it read is still there unchanged.
"""

from __future__ import annotations

import builtins
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, cast

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import WatchError

from bot.domain.approval import Resolver
from bot.domain.flow import StepRedriven, Transitioned
from bot.domain.incident import (
    Alert,
    AlertStatus,
    Incident,
    apply_transition,
)
from bot.domain.incident_record import ChatRefs, LostCard
from bot.domain.lifecycle import (
    FIRST_DIAGNOSIS,
    IncidentState,
    StepDeadlines,
    StepTaken,
    is_transient,
)
from bot.domain.planner import Planner, PlanOutcome
from bot.domain.xid import DEFAULT_POLICY, XidPolicy
from storage import inflight, keys
from storage.approvals import Withdrawal, mark_resolved_in, watch_pending, withdraw_in
from storage.audit import AuditLog
from storage.connection import lost_while_watching
from storage.events import IncidentEvents
from storage.inflight import Inflight, InflightRegistry, step_owner
from storage.ingest import CORE_FIELDS, IdBlocks, read_view, write_plan

_log = logging.getLogger(__name__)
E = TypeVar("E")  # an effect of the decision (``bot.domain.flow.Effect``)


class UnknownIncident(LookupError):
    def __init__(self, incident_id: str) -> None:
        super().__init__(f"no incident {incident_id!r}")
        self.incident_id = incident_id


class AlertSilenced(Exception):
    """``open_or_fold`` on a silenced (host, kind)."""


class Contention(RuntimeError):
    """Too many concurrent writers on the same keys; the caller should retry (HTTP 503)."""

    refusal = "contention"  # what ``storage.connection.refusal`` names it


@dataclass(frozen=True)
class IngestResult:
    outcomes: list[tuple[PlanOutcome, str | None]] = field(default_factory=list)

    @property
    def incident_ids(self) -> list[str]:
        return list(dict.fromkeys(i for _, i in self.outcomes if i))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for outcome, _ in self.outcomes:
            out[outcome.value] = out.get(outcome.value, 0) + 1
        return out

    def opened(self, alert: Alert) -> tuple[str, bool]:
        """The first alert's incident and whether it was created (or grouped under a
        parent); raises ``AlertSilenced`` for a silenced one."""
        outcome, incident_id = self.outcomes[0]
        if outcome is PlanOutcome.SILENCED:
            raise AlertSilenced(f"alerts for {alert.host}/{alert.kind} are silenced")
        if incident_id is None:
            raise UnknownIncident("?")
        return incident_id, outcome in (PlanOutcome.CREATED, PlanOutcome.GROUPED)


class Opens(Protocol):
    """What opens incidents from alerts outside the alert receiver (``/ir diag``, the
    data-loss watch): ``IncidentStore.ingest``, the receiver's own path (the planner, then
    ``incident.opened`` for the flow's consumer), handed to them by the composition root."""

    def __call__(self, alerts: Sequence[Alert], *,
                 chats: Mapping[str, ChatRefs] | None = None,
                 lost_cards: Mapping[str, LostCard] | None = None) -> IngestResult: ...


def _num(incident_id: str) -> int:
    tail = incident_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class IncidentStore:
    """Incidents on Redis. Needs a client with ``decode_responses=True``."""

    def __init__(self, redis: Redis, *, group_wait_s: float = 30.0,
                 clock: Callable[[], float] = time.time, max_attempts: int = 50,
                 id_block: int = 64, deadlines: StepDeadlines | None = None,
                 xid_policy: XidPolicy = DEFAULT_POLICY, ids: IdBlocks | None = None,
                 written: Callable[[Incident, Sequence[str]], None] | None = None,
                 before_ingest: Callable[[], None] | None = None) -> None:
        if not redis.connection_pool.connection_kwargs.get("decode_responses"):
            raise ValueError("IncidentStore needs a Redis client with decode_responses=True")
        self.redis = redis
        self.group_wait_s = group_wait_s
        self.clock = clock
        self.max_attempts = max_attempts
        self.audit = AuditLog(redis, clock=clock)
        self.events = IncidentEvents(redis)
        self.ids = ids or IdBlocks(redis, size=id_block)  # one per process (``Stores``)
        self.deadlines = deadlines or StepDeadlines()
        self.inflight = InflightRegistry(redis, clock)
        self.xid_policy = xid_policy  # which Xids are the application's (storms, issue 36)
        # told each record this process wrote, after its commit (``Stores.on_incident_written``:
        # the data-loss watch learns of an incident as it opens, not a period later), with
        # the fields it carries when it is not whole (an ingest reads only ``CORE_FIELDS``)
        self.written = written
        # called before each ingest (``Stores.before_incident_ingest``: the data-loss watch
        # re-opens what a wipe took before an alert can open it anew, issue 39)
        self.before_ingest = before_ingest

    # --- ingest ----------------------------------------------------------------------
    def ingest(self, alerts: Sequence[Alert], *,
               chats: Mapping[str, ChatRefs] | None = None,
               lost_cards: Mapping[str, LostCard] | None = None) -> IngestResult:
        """Apply a batch atomically; raises ``Contention`` after too many conflicts.
        ``chats``: alert fingerprint → the message an incident it creates takes over (the
        data-loss watch re-opening a lost incident edits its old message, issue 39).
        ``lost_cards``: alert fingerprint → the lost incident whose card, never recorded,
        an incident it creates looks for in the channel before posting its own."""
        if not alerts:
            return IngestResult()
        if self.before_ingest is not None:
            self.before_ingest()
        result, records = self._retrying(lambda pipe: self._ingest_once(
            pipe, alerts, chats or {}, lost_cards or {}))
        for record in records:
            self._tell(record, CORE_FIELDS)
        return cast(IngestResult, result)

    def open_or_fold(self, alert: Alert) -> tuple[Incident, bool]:
        """One firing alert: (its incident, whether it was created)."""
        incident_id, created = self.ingest([alert]).opened(alert)
        return self.require(incident_id), created

    def resolve_by_fingerprint(self, fingerprint: str, *, host: str = "-", kind: str = "-",
                               source: str = "api") -> Incident | None:
        """The alert with this fingerprint ended; the incident it fed, if any."""
        alert = Alert(source=source, host=host, kind=kind, status=AlertStatus.RESOLVED,
                      fingerprint=fingerprint)
        _, incident_id = self.ingest([alert]).outcomes[0]
        return self.get(incident_id) if incident_id else None

    def _ingest_once(self, pipe: Pipeline, alerts: Sequence[Alert],
                     chats: Mapping[str, ChatRefs], lost_cards: Mapping[str, LostCard]
                     ) -> tuple[IngestResult, builtins.list[Incident]]:
        view = read_view(pipe, alerts)
        now = self.clock()
        plan = Planner(view, now, self.group_wait_s, self.ids,
                       xid_policy=self.xid_policy).run(list(alerts))
        for alert, (outcome, incident_id) in zip(alerts, plan.outcomes, strict=True):
            if outcome is not PlanOutcome.CREATED or incident_id is None:
                continue
            chat, lost = chats.get(alert.fp), lost_cards.get(alert.fp)
            if chat is not None:
                plan.incidents[incident_id] = replace(plan.incidents[incident_id], chat=chat)
            elif lost is not None:
                plan.incidents[incident_id] = replace(plan.incidents[incident_id],
                                                      lost_card=lost)
        write_plan(pipe, plan, view, now, open_deadline_s=self.deadlines.open_s)
        return IngestResult(plan.outcomes), list(plan.incidents.values())

    def _tell(self, record: Incident, fields: Sequence[str] = ()) -> Incident:
        """Hand a committed record to ``written`` (in memory; its failure is not the write's).
        ``fields``: the only ones it carries (empty: all)."""
        if self.written is not None:
            try:
                self.written(record, fields)
            except Exception:  # an observer must not undo a commit
                _log.exception("telling the written record of %s failed", record.id)
        return record

    def _retrying(self, attempt: Callable[[Pipeline], Any]) -> Any:
        for n in range(self.max_attempts):
            try:
                with self.redis.pipeline(transaction=True) as pipe:
                    return attempt(pipe)
            except WatchError as exc:
                if (lost := lost_while_watching(exc)) is not None:
                    raise lost from None  # Redis refused, not a conflict: no retry storm
                time.sleep(random.uniform(0, 0.001 * min(n + 1, 20)))
        raise Contention(f"gave up after {self.max_attempts} conflicting attempts")

    # --- reads -----------------------------------------------------------------------
    def get(self, incident_id: str) -> Incident | None:
        raw = self.redis.hgetall(keys.incident(incident_id))
        return Incident.from_hash(raw) if raw else None  # type: ignore[arg-type]

    def require(self, incident_id: str) -> Incident:
        incident = self.get(incident_id)
        if incident is None:
            raise UnknownIncident(incident_id)
        return incident

    def list(self, open_only: bool = False, limit: int | None = None) -> builtins.list[Incident]:
        """Incidents oldest first; ``limit`` keeps the newest ones."""
        if open_only:
            ids = sorted(self.redis.smembers(keys.incidents_open()), key=_num)  # type: ignore[arg-type]
            ids = ids[-limit:] if limit else ids
        else:
            ids = self.redis.zrange(keys.incidents_all(), -(limit or 0) if limit else 0, -1)  # type: ignore[assignment]
        return self._load(list(ids))

    def children(self, parent_id: str) -> builtins.list[Incident]:
        ids = sorted(self.redis.smembers(keys.incident_children(parent_id)), key=_num)  # type: ignore[arg-type]
        return self._load(ids)

    def counts_by_state(self) -> dict[str, int]:
        """Open incidents per state (the ``/metrics`` gauge); every state present, so a
        state with no incidents reads 0 rather than keeping a stale value."""
        out: dict[str, int] = {state.value: 0 for state in IncidentState}
        for incident in self.list(open_only=True):
            out[incident.state.value] = out.get(incident.state.value, 0) + 1
        return out

    def glance(self, ids: Sequence[str]) -> builtins.list[tuple[str, str, str, str]]:
        """``(id, host, state, updated)`` of each existing incident of ``ids``, in one
        round trip and without the diagnosis (a storm's table lists every member each
        second, and reads in full only the rows it shows and that changed)."""
        with self.redis.pipeline(transaction=False) as pipe:
            for incident_id in ids:
                pipe.hmget(keys.incident(incident_id), ["host", "state", "updated"])
            rows = pipe.execute()
        return [(i, str(host), str(state), str(updated or ""))
                for i, (host, state, updated) in zip(ids, rows, strict=True)
                if host is not None and state is not None]

    def get_many(self, ids: Sequence[str]) -> builtins.list[Incident]:
        """The incidents of ``ids`` that exist, in that order, in one round trip (a storm's
        table reads every member at each render)."""
        return self._load(ids)

    def _load(self, ids: Sequence[str]) -> builtins.list[Incident]:
        with self.redis.pipeline(transaction=False) as pipe:
            for incident_id in ids:
                pipe.hgetall(keys.incident(incident_id))
            rows = pipe.execute()
        return [Incident.from_hash(r) for r in rows if r]

    # --- changes by the flow -----------------------------------------------------------
    def transition(self, incident_id: str, target: IncidentState | str, actor: str, reason: str,
                   evidence_hash: str | None = None, *, owner: str | None = None,
                   only_from: frozenset[IncidentState] | None = None) -> Incident:
        """Atomic state change plus its audit entry; raises ``IllegalTransition``.

        Into a transient state it also records ``owner`` (default: this thread) and the
        state's deadline. The same transient state again is a re-entry (a re-drive):
        allowed to the step's own owner, to anyone once it was released, overdue or its
        owner's process is gone; ``StepTaken`` otherwise, and when the incident is not in
        ``only_from``. Nothing is written when it raises."""
        goal = IncidentState(target)
        who = owner or step_owner()
        return self._tell(self._retrying(
            lambda pipe: self._transition_once(pipe, incident_id, goal, actor, reason,
                                               evidence_hash, who, only_from)))

    def _transition_once(self, pipe: Pipeline, incident_id: str, goal: IncidentState,
                         actor: str, reason: str, evidence_hash: str | None, owner: str,
                         only_from: frozenset[IncidentState] | None) -> Incident:
        current = self._watch_incident(pipe, incident_id)
        entry = inflight.watch_entry(pipe, incident_id)
        now = self.clock()
        if only_from is not None and current.state not in only_from:
            raise StepTaken(incident_id, current.state, "no longer waiting for this step")
        if goal is current.state and goal in FIRST_DIAGNOSIS:  # a diagnosis re-driven
            return self._reenter(pipe, current, entry, owner, actor, reason, now)
        new = apply_transition(current, goal, now)
        self._write_transition(pipe, current, new, entry, Moved(actor, reason, evidence_hash,
                                                                owner), now)
        return new

    def commit(self, incident_id: str,
               decide: Callable[[Incident], tuple[Incident, tuple[E, ...]]], *,
               owner: str | None = None,
               expect: Inflight | None = None) -> tuple[Incident, tuple[E, ...]]:
        """The flow runner's one write per event: WATCH the incident (and its in-flight
        entry), read it once, ``decide`` (pure: the record in, the new record and the
        effects out), then one MULTI/EXEC: the fields that changed and, when the state
        changed (a ``Transitioned`` effect says who and why), everything a ``transition``
        writes with it (audit line, in-flight owner and deadline, the open set, the
        resolved event and the withdrawals). The same transient state again is the step's
        re-entry claim (``StepTaken`` when its owner is alive). Another writer in between
        makes it read and decide again; an exception from ``decide`` writes nothing.
        ``expect``: the in-flight entry the reconciler saw; ``StepTaken`` (nothing written)
        when it is no longer the entry, and a ``StepRedriven`` effect re-drives it in the
        same MULTI (released, or held by ``owner`` while the action is read back)."""
        who = owner or step_owner()
        new, effects = cast(tuple[Incident, tuple[E, ...]], self._retrying(
            lambda pipe: self._commit_once(pipe, incident_id, decide, who, expect)))
        return self._tell(new), effects

    def _commit_once(self, pipe: Pipeline, incident_id: str,
                     decide: Callable[[Incident], tuple[Incident, tuple[E, ...]]],
                     owner: str, expect: Inflight | None = None) -> tuple[Incident, tuple[E, ...]]:
        current = self._watch_incident(pipe, incident_id)
        entry = inflight.watch_entry(pipe, incident_id)
        if expect is not None and entry != expect:
            raise StepTaken(incident_id, current.state, "its step changed since the sweep saw it")
        new, effects = decide(current)
        now = self.clock()
        step = next((e for e in effects if isinstance(e, StepRedriven)), None)
        if step is not None:
            return self._redrive(pipe, current, new, entry, step, owner, now), effects
        moved = next((e for e in effects if isinstance(e, Transitioned)), None)
        if moved is not None and new.state is current.state and new.state in FIRST_DIAGNOSIS:
            return self._reenter(pipe, current, entry, owner, moved.actor, moved.reason,
                                 now), effects
        if moved is None or new.state is current.state:
            fields = _changed(current, new)
            if fields:
                pipe.multi()
                pipe.hset(keys.incident(incident_id), mapping=fields)
                pipe.execute()
            return new, effects
        how = Moved(moved.actor, moved.reason, moved.evidence_hash, owner)
        self._write_transition(pipe, current, new, entry, how, now)
        return new, effects

    def _write_transition(self, pipe: Pipeline, current: Incident, new: Incident,
                          entry: Inflight | None, how: Moved, now: float) -> None:
        """One state change and all that goes with it, in one MULTI/EXEC (the incident's
        keys are WATCHed already): the record, the in-flight entry, the open set, the
        resolved event, the withdrawn approvals, the audit line."""
        incident_id = current.id
        resolving = new.state is IncidentState.RESOLVED
        stale = self._watch_indexes(pipe, current) if resolving else []
        pending = watch_pending(pipe, [incident_id]).get(incident_id, []) if resolving else []
        owner, actor = how.owner, how.actor
        pipe.multi()
        pipe.hset(keys.incident(incident_id), mapping=new.to_hash())
        if is_transient(new.state):
            inflight.enter(pipe, Inflight(incident_id, new.state, owner,
                                          now + self.deadlines.for_state(new.state),
                                          _carried(entry, new.state)))
        else:
            inflight.leave(pipe, incident_id)
        if not new.is_open:
            pipe.srem(keys.incidents_open(), incident_id)
            if stale:
                pipe.delete(*stale)
            fields = {"host": new.host, "kind": new.kind, "previous": current.state.value}
            self.events.add_to(pipe, "incident.resolved", incident_id, dict(fields))
        if resolving:
            why = _withdrawal(new, actor, now)
            mark_resolved_in(pipe, incident_id, why)
            withdraw_in(pipe, incident_id, pending, why)
        detail = {"from": current.state.value, "to": new.state.value, "reason": how.reason}
        self.audit.add_to(pipe, incident_id, actor, "transition", detail, how.evidence_hash,
                          ts=now)
        pipe.execute()

    def _reenter(self, pipe: Pipeline, current: Incident, entry: Inflight | None, owner: str,
                 actor: str, reason: str, now: float) -> Incident:
        """diagnosing → diagnosing (a re-drive): take the step over (same attempts count) if
        allowed. An action step (approved, remediating) is never re-entered this way: a
        second Approve is an illegal transition, and the reconciler fails it instead."""
        if entry is not None and not entry.may_claim(owner, now):
            raise StepTaken(current.id, current.state, f"owned by {entry.owner} for "
                                                        f"{entry.deadline - now:.0f}s more")
        attempts = entry.attempts if entry is not None else 0
        new = replace(current, updated=now)
        pipe.multi()
        pipe.hset(keys.incident(current.id), mapping={"updated": repr(now)})
        inflight.enter(pipe, Inflight(current.id, current.state, owner,
                                      now + self.deadlines.for_state(current.state), attempts))
        detail = {"state": current.state.value, "owner": owner, "attempts": attempts,
                  "reason": reason}
        self.audit.add_to(pipe, current.id, actor, "step.reentered", detail, None, ts=now)
        pipe.execute()
        return new

    # --- the reconciler's writes (bot/flow/reconcile.py) -------------------------------
    def _redrive(self, pipe: Pipeline, current: Incident, new: Incident,
                 entry: Inflight | None, step: StepRedriven, owner: str,
                 now: float) -> Incident:
        """An abandoned step re-driven (``StepRedriven``, decided on ``StepAbandoned``), one
        attempt more, audited ``incident.redriven``: released for anyone to claim with a
        fresh deadline, or held by ``owner`` for ``hold_s`` while the reconciler reads the
        action back (so no second sweep does it too)."""
        if entry is None:
            raise StepTaken(current.id, current.state, "no step in flight to re-drive")
        attempts = entry.attempts + 1
        detail: dict[str, Any] = {"state": entry.state.value, "owner": entry.owner}
        if step.hold_s is None:
            fresh = replace(entry, owner="", attempts=attempts,
                            deadline=now + self.deadlines.for_state(entry.state))
            detail |= {"attempts": attempts, "reason": step.reason}
        else:
            fresh = replace(entry, owner=owner, deadline=now + step.hold_s, attempts=attempts)
            detail |= {"reason": step.reason, "then": "read_back"}
        fields = _changed(current, new)
        pipe.multi()
        if fields:
            pipe.hset(keys.incident(current.id), mapping=fields)
        inflight.enter(pipe, fresh)
        self.audit.add_to(pipe, current.id, step.actor, "incident.redriven", detail, None, ts=now)
        pipe.execute()
        return new

    def drop_stale(self, seen: Inflight) -> bool:
        """Remove an entry whose incident is gone or elsewhere (nothing to re-drive)."""
        def once(pipe: Pipeline) -> bool:
            pipe.watch(keys.incident(seen.incident_id))
            raw = cast(dict[str, str], pipe.hgetall(keys.incident(seen.incident_id)))
            if inflight.watch_entry(pipe, seen.incident_id) != seen or (
                    raw and raw.get("state") == seen.state.value):
                return False
            pipe.multi()
            inflight.leave(pipe, seen.incident_id)
            pipe.execute()
            return True

        return bool(self._retrying(once))

    def _watch_incident(self, pipe: Pipeline, incident_id: str) -> Incident:
        pipe.watch(keys.incident(incident_id))
        raw = pipe.hgetall(keys.incident(incident_id))
        if not raw:
            raise UnknownIncident(incident_id)
        return Incident.from_hash(raw)  # type: ignore[arg-type]

    def _watch_indexes(self, pipe: Pipeline, incident: Incident) -> builtins.list[str]:
        """The (host, kind) and fingerprint keys that still point at this incident."""
        names = [keys.incident_by_host_kind(incident.host, incident.kind)]
        names += [keys.alert_incident(fp) for fp in incident.fingerprints]
        pipe.watch(*names)
        values = cast(list[str | None], pipe.mget(names))
        return [n for n, v in zip(names, values, strict=True) if v == incident.id]

    def update(self, incident_id: str, change: Callable[[Incident], Incident]) -> Incident:
        """Apply ``change`` (pure: the record in, the record out) to the stored incident
        atomically: WATCH the hash, read it, apply, HSET only the fields that changed;
        another writer in between makes it read and apply again."""
        def once(pipe: Pipeline) -> Incident:
            current = self._watch_incident(pipe, incident_id)
            new = replace(change(current), updated=self.clock())
            before = current.to_hash()
            fields = {k: v for k, v in new.to_hash().items() if before.get(k) != v}
            pipe.multi()
            pipe.hset(keys.incident(incident_id), mapping=fields)
            pipe.execute()
            return new

        return self._tell(self._retrying(once))


def _withdrawal(resolved: Incident, actor: str, now: float) -> Withdrawal:
    """A person's resolve (Resolve button, ``/ir resolve``) names them in ``resolved_by``
    (before the transition, or in the same decided record); any other resolve through
    here is the flow's (the bot's)."""
    if resolved.resolved_by:
        return Withdrawal(resolved.resolved_by, Resolver.PERSON, now)
    return Withdrawal(actor, Resolver.BOT, now)


@dataclass(frozen=True)
class Moved:
    """Who moved the incident and why, for the transition's audit line and its owner."""

    actor: str
    reason: str
    evidence_hash: str | None
    owner: str


def _changed(current: Incident, new: Incident) -> dict[str, str]:
    """The hash fields ``new`` changes (nothing when the decision changed nothing)."""
    before = current.to_hash()
    return {k: v for k, v in new.to_hash().items() if before.get(k) != v}


def _carried(entry: Inflight | None, state: IncidentState) -> int:
    """Re-drive attempts carry from open into diagnosing (one step: the first diagnosis)."""
    if entry is None:
        return 0
    same_step = entry.state is state or {entry.state, state} <= FIRST_DIAGNOSIS
    return entry.attempts if same_step else 0
