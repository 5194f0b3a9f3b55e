"""Decide what a batch of alerts does to the incidents, given a snapshot of Redis. Pure.

Rules (documented in docs/alerts.md):

- A delivery whose dedup identity was already applied is a duplicate: no effect.
- A firing alert for a silenced (host, kind) is dropped and *not* marked seen, so the
  same alert counts again once the silence ends. Inside a recurring maintenance window
  (``bot/domain/maintenance.py``) it is dropped the same way and recorded in the audit.
- One open incident per (host, kind): a repeat folds in (count, last seen, fingerprint).
- Otherwise a new incident. If a group window for the kind is open (started by another
  host's incident less than ``group_wait_s`` ago and that incident still open), the new
  incident is a child of that parent and the parent lists the host: one chat message per
  (kind, window). If not, the new incident is top level and starts a window itself.
- An alert about an Xid (its ``xid`` label, or "Xid N" in its summary) counts on its
  incident's tally for that Xid (``bot/domain/xid_storm.py``); while every Xid folded in is
  the application's, the incident is at most a warning (no page) and joins no group (each
  host's storm is its own count, its own message).
- A resolved alert removes its fingerprint; with none left the incident resolves if its
  state allows, else it keeps its state and records that the alert cleared. Events
  (``vm_restart``) never resolve from their alert ending: the flow or a person does; nor
  does a hardware fault (``bot.domain.hardware``): the GPU is still broken.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bot.domain.hardware import outlives_alert
from bot.domain.incident import (
    EVENT_KINDS,
    RECOVERED,
    Alert,
    AlertStatus,
    GroupWindow,
    Incident,
    SilenceRule,
    apply_transition,
    fold,
    join_group,
    silence_candidates,
    window_admits,
)
from bot.domain.lifecycle import IncidentState, can_transition
from bot.domain.maintenance import MaintenanceWindow, in_window
from bot.domain.xid import DEFAULT_POLICY, XidPolicy
from bot.domain.xid_storm import XID_ALERT_ENDED, app_only, capped, cleared, gpu_of, tally, xid_of


class PlanOutcome(StrEnum):
    CREATED = "created"  # a new top-level incident (a chat message)
    GROUPED = "grouped"  # a new child under a group parent (no new message)
    FOLDED = "folded"  # a repeat of an open incident
    DUPLICATE = "duplicate"  # this delivery was already applied
    SILENCED = "silenced"
    RESOLVED = "resolved"  # the incident resolved
    CLEARED = "cleared"  # the alert resolved; the incident stays (other alerts, or its state)
    UNMATCHED = "unmatched"  # a resolve for nothing open


@dataclass
class View:
    """What Redis held for the keys a batch touches (read under WATCH)."""

    seen: set[str] = field(default_factory=set)
    open_ids: dict[tuple[str, str], str] = field(default_factory=dict)
    fp_ids: dict[str, str] = field(default_factory=dict)
    windows: dict[str, GroupWindow] = field(default_factory=dict)
    silences: dict[tuple[str, str], SilenceRule] = field(default_factory=dict)
    incidents: dict[str, Incident] = field(default_factory=dict)
    maintenance: tuple[MaintenanceWindow, ...] = ()  # recurring silences (issue 28)


@dataclass(frozen=True)
class Event:
    kind: str  # incident.opened | incident.folded | incident.grouped | incident.resolved | ...
    incident_id: str
    fields: dict[str, str]


@dataclass(frozen=True)
class Note:
    """One audit entry to append in the same transaction."""

    incident_id: str
    actor: str
    action: str
    detail: dict[str, Any]


@dataclass
class Plan:
    """The writes a batch needs; ``None`` values mean delete."""

    outcomes: list[tuple[PlanOutcome, str | None]] = field(default_factory=list)
    incidents: dict[str, Incident] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    open_keys: dict[tuple[str, str], str | None] = field(default_factory=dict)
    fp_index: dict[str, str | None] = field(default_factory=dict)
    windows: dict[str, GroupWindow] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)
    children: list[tuple[str, str]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


class Planner:
    """Applies alerts one by one to a private copy of the view, recording the writes."""

    def __init__(self, view: View, now: float, group_wait_s: float, ids: Iterator[str], *,
                 xid_policy: XidPolicy = DEFAULT_POLICY) -> None:
        self.view = View(set(view.seen), dict(view.open_ids), dict(view.fp_ids),
                         dict(view.windows), dict(view.silences), dict(view.incidents),
                         view.maintenance)
        self.now = now
        self.group_wait_s = group_wait_s
        self.ids = ids
        self.plan = Plan()
        self.folded: set[str] = set()
        self.xid_policy = xid_policy

    def run(self, alerts: list[Alert]) -> Plan:
        for alert in alerts:
            self.plan.outcomes.append(self.apply(alert))
        for incident_id in sorted(self.folded):  # one event per incident, not per repeat
            incident = self.view.incidents[incident_id]
            self._event("incident.folded", incident, count=incident.count)
        return self.plan

    def apply(self, alert: Alert) -> tuple[PlanOutcome, str | None]:
        key = alert.dedup_key
        if key is not None and key in self.view.seen:
            return PlanOutcome.DUPLICATE, self._known_id(alert)
        if alert.status is AlertStatus.FIRING and (self._silenced(alert)
                                                   or self._in_maintenance(alert)):
            return PlanOutcome.SILENCED, None
        result = self._resolve(alert) if alert.status is AlertStatus.RESOLVED else self._fire(alert)
        if key is not None:
            self.view.seen.add(key)
            self.plan.seen.append(key)
        return result

    # --- helpers ---------------------------------------------------------------------
    def _known_id(self, alert: Alert) -> str | None:
        return self.view.fp_ids.get(alert.fp) or self.view.open_ids.get((alert.host, alert.kind))

    def _silenced(self, alert: Alert) -> bool:
        for slot in silence_candidates(alert.host, alert.kind):
            silence = self.view.silences.get(slot)
            if silence is not None and silence.active(self.now):
                return True
        return False

    def _in_maintenance(self, alert: Alert) -> bool:
        """Inside a recurring window: recorded in the audit stream, not posted."""
        window = in_window(self.view.maintenance, alert.host, alert.kind, self.now)
        if window is not None:
            self._note("", alert.source, "alert.suppressed", host=alert.host, kind=alert.kind,
                       window=window.window.text, hosts=window.hosts, reason=window.reason,
                       summary=alert.summary[:200])
        return window is not None

    def _put(self, incident: Incident) -> None:
        self.view.incidents[incident.id] = incident
        self.plan.incidents[incident.id] = incident

    def _set_open(self, host: str, kind: str, incident_id: str | None) -> None:
        if incident_id is None:
            self.view.open_ids.pop((host, kind), None)
        else:
            self.view.open_ids[(host, kind)] = incident_id
        self.plan.open_keys[(host, kind)] = incident_id

    def _set_fp(self, fp: str, incident_id: str | None) -> None:
        if self.view.fp_ids.get(fp) == incident_id:
            return  # unchanged: nothing to write
        if incident_id is None:
            self.view.fp_ids.pop(fp, None)
        else:
            self.view.fp_ids[fp] = incident_id
        self.plan.fp_index[fp] = incident_id

    def _event(self, kind: str, incident: Incident, **fields: object) -> None:
        base = {"host": incident.host, "kind": incident.kind}
        base.update({k: str(v) for k, v in fields.items()})
        self.plan.events.append(Event(kind, incident.id, base))

    def _note(self, incident_id: str, actor: str, action: str, **detail: Any) -> None:
        self.plan.notes.append(Note(incident_id, actor, action, detail))

    # --- firing ----------------------------------------------------------------------
    def _fire(self, alert: Alert) -> tuple[PlanOutcome, str]:
        current_id = self.view.open_ids.get((alert.host, alert.kind))
        current = self.view.incidents.get(current_id) if current_id else None
        if current is not None and current.is_open:
            folded = self._storm(fold(current, alert, self.now), alert)
            self._put(folded)
            self._set_fp(alert.fp, folded.id)
            self.folded.add(folded.id)
            return PlanOutcome.FOLDED, folded.id
        return self._open(alert)

    def _storm(self, incident: Incident, alert: Alert) -> Incident:
        """The alert's Xid counted on the incident, its severity capped while every Xid
        is the application's."""
        xid = xid_of(alert.labels, alert.details, alert.summary)
        if xid is None:
            return incident
        tallies = tally(incident.xids, xid, gpu_of(alert.labels, alert.details), self.now,
                        self.xid_policy)
        return replace(incident, xids=tallies,
                       severity=capped(incident.severity, tallies, self.xid_policy))

    def _solo(self, alert: Alert) -> bool:
        """An application's Xid storm: its own incident and message, never a group's."""
        xid = xid_of(alert.labels, alert.details, alert.summary)
        return xid is not None and app_only(tally((), xid, "", self.now, self.xid_policy))

    def _open(self, alert: Alert) -> tuple[PlanOutcome, str]:
        incident_id = next(self.ids)
        solo = self._solo(alert)
        window = None if solo else self.view.windows.get(alert.kind)
        parent = self.view.incidents.get(window.parent_id) if window else None
        if window_admits(window, parent, alert.host, self.now) and parent is not None:
            child = self._storm(Incident.open_from(incident_id, alert, self.now,
                                                   parent_id=parent.id), alert)
            self._put(join_group(parent, alert.host, self.now))
            self._register(child, alert)
            self.plan.children.append((parent.id, child.id))
            self._event("incident.grouped", parent, child=child.id, child_host=alert.host,
                        hosts=len(self.view.incidents[parent.id].hosts))
            self._note(child.id, alert.source, "opened", parent=parent.id, summary=alert.summary)
            self._note(parent.id, alert.source, "grouped", host=alert.host, child=child.id)
            return PlanOutcome.GROUPED, child.id
        incident = self._storm(Incident.open_from(incident_id, alert, self.now), alert)
        self._register(incident, alert)
        if self.group_wait_s > 0 and not solo:
            window = GroupWindow(alert.kind, incident.id, self.now + self.group_wait_s)
            self.view.windows[alert.kind] = window
            self.plan.windows[alert.kind] = window
        self._event("incident.opened", incident, severity=incident.severity.value,
                    summary=incident.summary[:200])
        self._note(incident.id, alert.source, "opened", summary=alert.summary,
                   severity=alert.severity.value, labels=alert.labels)
        return PlanOutcome.CREATED, incident.id

    def _register(self, incident: Incident, alert: Alert) -> None:
        self._put(incident)
        self.plan.created.append(incident.id)
        self._set_open(alert.host, alert.kind, incident.id)
        self._set_fp(alert.fp, incident.id)

    # --- resolved --------------------------------------------------------------------
    def _resolve(self, alert: Alert) -> tuple[PlanOutcome, str | None]:
        by_fp = self.view.fp_ids.get(alert.fp)
        incident_id = by_fp or (None if alert.explicit_fp
                                else self.view.open_ids.get((alert.host, alert.kind)))
        incident = self.view.incidents.get(incident_id) if incident_id else None
        if incident is None or not incident.is_open:
            if by_fp:
                self._set_fp(alert.fp, None)
            return PlanOutcome.UNMATCHED, None
        xid = xid_of(alert.labels, alert.details, alert.summary)
        if xid is not None and incident.xids:  # said on the message: the GPU recovered
            incident = replace(incident, xids=cleared(incident.xids, XID_ALERT_ENDED, self.now,
                                                      xid))
            self._put(incident)
        # re-opened after a data loss, its other alerts are what the lost data knew (one may
        # have resolved while the data was gone): the resolve of one it is known by closes it
        remaining = tuple(f for f in incident.fingerprints if f != alert.fp) \
            if by_fp and incident.source != RECOVERED else ()
        if by_fp:
            self._set_fp(alert.fp, None)
        if remaining:
            self._put(replace(incident, fingerprints=remaining, updated=self.now))
            return PlanOutcome.CLEARED, incident.id
        return self._close(incident, alert.source)

    def _close(self, incident: Incident, actor: str) -> tuple[PlanOutcome, str]:
        for fp in incident.fingerprints:
            if self.view.fp_ids.get(fp) == incident.id:
                self._set_fp(fp, None)
        if (incident.kind in EVENT_KINDS or outlives_alert(incident)
                or not can_transition(incident.state, IncidentState.RESOLVED)):
            self._put(replace(incident, fingerprints=(), cleared_at=self.now, updated=self.now))
            self._event("incident.alert_cleared", incident, state=incident.state.value)
            self._note(incident.id, actor, "alert.cleared", state=incident.state.value)
            return PlanOutcome.CLEARED, incident.id
        resolved = apply_transition(incident, IncidentState.RESOLVED, self.now)
        self._put(resolved)
        if self.view.open_ids.get((incident.host, incident.kind)) == incident.id:
            self._set_open(incident.host, incident.kind, None)
        self._event("incident.resolved", resolved, previous=incident.state.value)
        self._note(incident.id, actor, "transition", **{
            "from": incident.state.value, "to": resolved.state.value, "reason": "alert resolved"})
        return PlanOutcome.RESOLVED, incident.id
