"""Incidents as data: alerts, incidents, silences, group windows, and the pure rules.

Nothing here does I/O. ``storage/incidents.py`` reads a snapshot from Redis, the
planner (``bot/domain/planner.py``) applies these rules to it, and storage writes the
result in one transaction. Keeping the rules pure lets them be tested exhaustively and
lets two replicas agree: the decision depends only on what Redis held.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bot.domain.findings import Diagnosis, Severity
from bot.domain.incident_record import (
    ActionPlan,
    ChatRefs,
    GateRecord,
    HostRebootMark,
    LastOutcome,
    LostCard,
    ProbeOutput,
    ProgressTracker,
    RebootPending,
    Running,
    Snooze,
    StepResult,
)
from bot.domain.lifecycle import IllegalTransition, IncidentState, is_terminal, transition
from bot.domain.validate import valid_host
from bot.domain.xid_storm import XidTally

__all__ = [
    "EVENT_KINDS", "SCHEMA_VERSION", "WILDCARD", "Alert", "AlertStatus", "GroupWindow",
    "IllegalTransition", "Incident", "IncidentSchemaError", "IncidentState", "SilenceRule",
    "apply_transition", "default_fingerprint", "flat", "fold",
    "join_group", "max_severity", "parse_severity", "silence_candidates", "valid_host",
    "valid_kind", "window_admits",
]

WILDCARD = "*"
# Kinds that are events, not conditions: their alert ending (a reboot leaves the
# "rebooted recently" window) says nothing about the damage, so it never resolves them.
EVENT_KINDS = frozenset({"vm_restart"})
KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}
# 1: the flow's state in one free-form ``meta`` JSON field; 2: one typed field per part
SCHEMA_VERSION = 2


class IncidentSchemaError(ValueError):
    """A stored incident this bot cannot read (written by a newer one, or damaged)."""


class AlertStatus(StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


def parse_severity(value: object) -> Severity:
    """Map free text ("crit", "page", "Warning") to our three levels; unknown is warning."""
    text = str(value or "").strip().lower()
    if text in {"critical", "crit", "page", "error", "high", "emergency"}:
        return Severity.CRITICAL
    if text in {"info", "informational", "low", "none", "notice"}:
        return Severity.INFO
    return Severity.WARNING


def max_severity(a: Severity, b: Severity) -> Severity:
    return a if _SEVERITY_RANK[a] >= _SEVERITY_RANK[b] else b


def valid_kind(kind: str) -> bool:
    return bool(KIND_RE.match(kind))


def default_fingerprint(host: str, kind: str) -> str:
    """Fingerprint of an alert that brings none: one per (host, kind)."""
    return hashlib.sha1(f"{host}\0{kind}".encode()).hexdigest()[:16]


# the source of an incident re-opened after Redis lost the bot's data (``bot.flow.data_loss``):
# the fingerprints it was re-opened with are what the lost data knew, and whether their
# alerts still fire is unknown (a resolve sent while the data was gone is never sent again)
RECOVERED = "recovered"


@dataclass(frozen=True)
class Alert:
    """One normalised alert, whatever its source (Alertmanager, webhook, agent)."""

    source: str  # "alertmanager" | "webhook" | "agent"
    host: str
    kind: str
    status: AlertStatus = AlertStatus.FIRING
    summary: str = ""
    severity: Severity = Severity.WARNING
    labels: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""  # empty: default_fingerprint(host, kind)
    identity: str | None = None  # dedup identity of this delivery; None: never deduplicated

    @property
    def fp(self) -> str:
        return self.fingerprint or default_fingerprint(self.host, self.kind)

    @property
    def explicit_fp(self) -> bool:
        return bool(self.fingerprint)

    @property
    def dedup_key(self) -> str | None:
        """A fixed-length digest of ``identity`` (identities may be long or odd)."""
        if self.identity is None:
            return None
        return hashlib.sha1(self.identity.encode()).hexdigest()


@dataclass(frozen=True)
class Incident:
    """One incident: the alert facts, its state, and the flow's typed parts
    (``bot/domain/incident_record.py``). Persisted as one Redis hash, a field per part."""

    id: str
    host: str
    kind: str
    state: IncidentState = IncidentState.OPEN
    summary: str = ""
    severity: Severity = Severity.WARNING
    count: int = 1
    first_seen: float = 0.0
    last_seen: float = 0.0
    updated: float = 0.0
    resolved_at: float | None = None
    cleared_at: float | None = None  # every alert ended but the state kept it open
    source: str = ""
    parent_id: str | None = None
    hosts: tuple[str, ...] = ()  # a parent: every host in its group, its own first
    fingerprints: tuple[str, ...] = ()  # alerts still firing into this incident
    labels: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    # --- the flow's parts: what it found, offered, ran, and where it is posted ---
    diagnosis: Diagnosis | None = None
    probe_output: tuple[ProbeOutput, ...] = ()
    evidence_hash: str = ""
    plans: tuple[ActionPlan, ...] = ()
    revert_plan: ActionPlan | None = None
    results: tuple[StepResult, ...] = ()
    last_outcome: LastOutcome | None = None
    running: Running | None = None
    chat: ChatRefs | None = None
    # re-opened after a data loss from an incident whose card's ts was never recorded: the
    # card to look for before posting one (``bot.chat.outbox``), never rendered
    lost_card: LostCard | None = None
    progress: ProgressTracker | None = None
    job_id: str | None = None
    reboot: RebootPending | None = None
    host_reboot: HostRebootMark | None = None
    acked_by: str = ""
    resolved_by: str = ""
    escalated_by: str = ""
    snooze: Snooze | None = None
    gate: GateRecord | None = None
    xids: tuple[XidTally, ...] = ()  # one tally per Xid folded in (bot/domain/xid_storm.py)
    # the approvals whose click this incident accepted (newest last, ``ACCEPTED_KEPT``): a
    # click event delivered again (its consumer died before the ack) never runs twice
    accepted: tuple[str, ...] = ()

    @property
    def is_open(self) -> bool:
        return not is_terminal(self.state)

    @property
    def is_parent(self) -> bool:
        return len(self.hosts) > 1

    def with_result(self, result: StepResult) -> Incident:
        """One more line in the results."""
        return replace(self, results=(*self.results, result))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "host": self.host, "kind": self.kind, "state": self.state.value,
            "summary": self.summary, "severity": self.severity.value, "count": self.count,
            "first_seen": self.first_seen, "last_seen": self.last_seen, "updated": self.updated,
            "resolved_at": self.resolved_at, "cleared_at": self.cleared_at,
            "source": self.source, "parent_id": self.parent_id,
            "hosts": list(self.hosts), "fingerprints": list(self.fingerprints),
            "labels": self.labels, "details": self.details, **self.parts_to_dict(),
        }

    def parts_to_dict(self) -> dict[str, Any]:
        """The flow's parts as JSON values, keyed by their hash field."""
        def js(part: Any) -> Any:
            return None if part is None else part.to_json()

        return {
            "schema": SCHEMA_VERSION,
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis is not None else None,
            "probe_output": [p.to_json() for p in self.probe_output],
            "evidence_hash": self.evidence_hash,
            "plans": [p.to_json() for p in self.plans], "revert_plan": js(self.revert_plan),
            "results": [r.to_json() for r in self.results],
            "last_outcome": js(self.last_outcome), "running": js(self.running),
            "chat": js(self.chat), "lost_card": js(self.lost_card),
            "progress": js(self.progress), "job": self.job_id,
            "reboot": js(self.reboot), "host_reboot": js(self.host_reboot),
            "acked_by": self.acked_by, "resolved_by": self.resolved_by,
            "escalated_by": self.escalated_by, "snooze": js(self.snooze), "gate": js(self.gate),
            "xids": [t.to_json() for t in self.xids], "accepted": list(self.accepted),
        }

    def to_hash(self) -> dict[str, str]:
        """Flat string mapping for HSET (None becomes the empty string, so HSET clears it)."""
        return {key: flat(value) for key, value in self.to_dict().items()}

    @classmethod
    def from_hash(cls, raw: dict[str, str]) -> Incident:
        """Read a stored incident; a version-1 record's ``meta`` JSON is read as its parts.
        Raises ``IncidentSchemaError`` for a record it cannot read."""
        try:
            return cls._from_hash(raw)
        except IncidentSchemaError:
            raise
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise IncidentSchemaError(
                f"incident {raw.get('id', '?')!r} cannot be read: {type(exc).__name__}: {exc}"
            ) from exc

    @classmethod
    def _from_hash(cls, raw: dict[str, str]) -> Incident:
        def js(name: str, default: Any) -> Any:
            text = raw.get(name) or ""
            return json.loads(text) if text else default

        version = int(raw.get("schema") or 1)
        if version > SCHEMA_VERSION:
            raise IncidentSchemaError(
                f"incident {raw.get('id', '?')!r} has schema {version}; this bot reads up to "
                f"{SCHEMA_VERSION}: upgrade it")
        parts = js("meta", {}) if version == 1 else {
            key: js(key, None) for key in _PART_FIELDS}
        return cls(
            id=raw["id"], host=raw["host"], kind=raw["kind"], state=IncidentState(raw["state"]),
            summary=raw.get("summary", ""), severity=parse_severity(raw.get("severity")),
            count=int(raw.get("count") or 1), first_seen=float(raw.get("first_seen") or 0),
            last_seen=float(raw.get("last_seen") or 0), updated=float(raw.get("updated") or 0),
            resolved_at=float(raw["resolved_at"]) if raw.get("resolved_at") else None,
            cleared_at=float(raw["cleared_at"]) if raw.get("cleared_at") else None,
            source=raw.get("source", ""), parent_id=raw.get("parent_id") or None,
            hosts=tuple(js("hosts", [])), fingerprints=tuple(js("fingerprints", [])),
            labels=js("labels", {}), details=js("details", {}),
            **(_parts_from_v1(parts) if version == 1 else _parts_from(parts, raw)),
        )

    @classmethod
    def open_from(cls, incident_id: str, alert: Alert, now: float,
                  parent_id: str | None = None) -> Incident:
        return cls(
            id=incident_id, host=alert.host, kind=alert.kind, summary=alert.summary,
            severity=alert.severity, count=1, first_seen=now, last_seen=now, updated=now,
            source=alert.source, parent_id=parent_id, hosts=(alert.host,),
            fingerprints=(alert.fp,), labels=dict(alert.labels), details=dict(alert.details),
        )


_PART_FIELDS = ("diagnosis", "probe_output", "plans", "revert_plan", "results", "last_outcome",
                "running", "chat", "lost_card", "progress", "reboot", "host_reboot", "snooze",
                "gate", "xids", "accepted")


def flat(value: object) -> str:
    """One hash field as ``Incident.to_hash`` writes it: JSON for structures, "" for None."""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return "" if value is None else str(value)


def _opt(raw: Any, reader: Any) -> Any:
    return reader(raw) if isinstance(raw, dict) else None


def _parts_from(parts: dict[str, Any], raw: dict[str, str]) -> dict[str, Any]:
    """The typed parts of a version-2 record (JSON fields plus three plain strings)."""
    return {
        **_structured(parts),
        "evidence_hash": raw.get("evidence_hash", ""), "job_id": raw.get("job") or None,
        "acked_by": raw.get("acked_by", ""), "resolved_by": raw.get("resolved_by", ""),
        "escalated_by": raw.get("escalated_by", ""),
    }


def _parts_from_v1(meta: dict[str, Any]) -> dict[str, Any]:
    """A version-1 record's ``meta``: the same parts under their old names."""
    renamed = {**meta, "last_outcome": meta.get("result"), "snooze": meta.get("snoozed")}
    return {
        **_structured(renamed),
        "evidence_hash": str(meta.get("evidence_hash") or ""),
        "job_id": str(meta["job"]) if meta.get("job") else None,
        "acked_by": str(meta.get("acked") or ""), "resolved_by": str(meta.get("resolved_by") or ""),
        "escalated_by": str(meta.get("escalated") or ""),
    }


def _structured(parts: dict[str, Any]) -> dict[str, Any]:
    diagnosis = parts.get("diagnosis")
    return {
        "diagnosis": Diagnosis.from_dict(diagnosis) if isinstance(diagnosis, dict) else None,
        "probe_output": tuple(ProbeOutput.from_json(p) for p in parts.get("probe_output") or ()),
        "plans": tuple(ActionPlan.from_json(p) for p in parts.get("plans") or ()),
        "revert_plan": _opt(parts.get("revert_plan"), ActionPlan.from_json),
        "results": tuple(StepResult.from_json(r) for r in parts.get("results") or ()),
        "last_outcome": _opt(parts.get("last_outcome"), LastOutcome.from_json),
        "running": _opt(parts.get("running"), Running.from_json),
        "chat": _opt(parts.get("chat"), ChatRefs.from_json),
        "lost_card": _opt(parts.get("lost_card"), LostCard.from_json),
        "progress": _opt(parts.get("progress"), ProgressTracker.from_json),
        "reboot": _opt(parts.get("reboot"), RebootPending.from_json),
        "host_reboot": _opt(parts.get("host_reboot"), HostRebootMark.from_json),
        "snooze": _opt(parts.get("snooze"), Snooze.from_json),
        "gate": _opt(parts.get("gate"), GateRecord.from_json),
        "xids": tuple(XidTally.from_json(t) for t in parts.get("xids") or ()
                      if isinstance(t, dict)),
        "accepted": tuple(a for a in parts.get("accepted") or () if isinstance(a, str)),
    }


def fold(incident: Incident, alert: Alert, now: float) -> Incident:
    """A repeat of an open incident's alert: count it, keep the newest words and details.

    Labels stay those of the first alert (what the incident was opened for); the
    severity is the worst seen. Only these fields change, so storage writes only them.
    """
    fps = incident.fingerprints if alert.fp in incident.fingerprints else (
        *incident.fingerprints, alert.fp)
    return replace(
        incident, count=incident.count + 1, last_seen=max(incident.last_seen, now), updated=now,
        summary=alert.summary or incident.summary, fingerprints=fps,
        severity=max_severity(incident.severity, alert.severity),
        details=alert.details or incident.details, cleared_at=None,
    )


def join_group(parent: Incident, host: str, now: float) -> Incident:
    """Add a host to a group parent's list (idempotent)."""
    if host in parent.hosts:
        return parent
    return replace(parent, hosts=(*parent.hosts, host), updated=now)


def apply_transition(incident: Incident, target: IncidentState, now: float) -> Incident:
    """The state change itself; raises ``IllegalTransition`` (never overwrites)."""
    state = transition(incident.state, target)
    resolved = now if state is IncidentState.RESOLVED else incident.resolved_at
    fps = () if state is IncidentState.RESOLVED else incident.fingerprints
    return replace(incident, state=state, updated=now, resolved_at=resolved, fingerprints=fps)


@dataclass(frozen=True)
class IncidentSummary:
    """The facts of an incident that the digest and escalation read (no meta, no I/O)."""

    id: str
    host: str
    kind: str
    severity: str
    state: str
    opened_at: float


@dataclass(frozen=True)
class GroupWindow:
    """The first incident of a kind opens a window; other hosts join it until ``until``.

    The window is fixed from the parent's opening, not sliding, so a storm that lasts
    longer than ``group_wait_s`` still gives one message per window, never zero news.
    """

    kind: str
    parent_id: str
    until: float

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "parent": self.parent_id, "until": self.until})

    @classmethod
    def from_json(cls, text: str) -> GroupWindow:
        data = json.loads(text)
        return cls(kind=str(data["kind"]), parent_id=str(data["parent"]),
                   until=float(data["until"]))


def window_admits(window: GroupWindow | None, parent: Incident | None, host: str,
                  now: float) -> bool:
    """Whether a new incident on ``host`` joins the window's parent as a child."""
    if window is None or parent is None or now >= window.until:
        return False
    return parent.is_open and parent.host != host


@dataclass(frozen=True)
class SilenceRule:
    """Firing alerts for (host, kind) are dropped until ``until``; either may be ``*``."""

    host: str
    kind: str
    until: float
    author: str
    reason: str = ""
    created: float = 0.0

    def active(self, now: float) -> bool:
        return now < self.until

    def to_json(self) -> str:
        return json.dumps({"host": self.host, "kind": self.kind, "until": self.until,
                           "author": self.author, "reason": self.reason, "created": self.created})

    @classmethod
    def from_json(cls, text: str) -> SilenceRule:
        d = json.loads(text)
        return cls(host=d["host"], kind=d["kind"], until=float(d["until"]), author=d["author"],
                   reason=d.get("reason", ""), created=float(d.get("created", 0.0)))


def silence_candidates(host: str, kind: str) -> tuple[tuple[str, str], ...]:
    """The (host, kind) silence slots that cover an alert, most specific first."""
    return ((host, kind), (host, WILDCARD), (WILDCARD, kind))
