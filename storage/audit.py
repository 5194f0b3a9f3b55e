"""The audit log: who did what to which incident, when, and a hash of the evidence shown.

Two Redis streams per entry, written in one transaction: the incident's own stream
(``keys.audit(id)``, its timeline) and the global one (``keys.audit_all()``, capped).
Stream ids are time-ordered and assigned by Redis, so two replicas never reorder entries.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis import Redis
from redis.client import Pipeline

from storage import keys

GLOBAL_MAXLEN = 200_000  # approximate cap of the global stream; per-incident streams are kept
MAX_TEXT = 200  # actor and action are clipped to this


def hash_evidence(evidence: Any) -> str:
    """SHA-256 of the canonical JSON of what a person was shown (sorted keys, no spaces)."""
    text = json.dumps(evidence, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class AuditEntry:
    id: str  # stream entry id in the incident's stream ("<ms>-<seq>")
    incident_id: str
    ts: float
    actor: str
    action: str
    detail: dict[str, Any] = field(default_factory=dict)
    evidence_hash: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "incident_id": self.incident_id, "ts": self.ts,
                "actor": self.actor, "action": self.action, "detail": self.detail,
                "evidence_hash": self.evidence_hash}

    @classmethod
    def from_stream(cls, entry_id: str, raw: dict[str, str]) -> AuditEntry:
        return cls(
            id=entry_id, incident_id=raw.get("incident", ""), ts=float(raw.get("ts") or 0.0),
            actor=raw.get("actor", ""), action=raw.get("action", ""),
            detail=json.loads(raw.get("detail") or "{}"),
            evidence_hash=raw.get("evidence") or None,
        )


def entry_fields(incident_id: str, actor: str, action: str, detail: dict[str, Any],
                 evidence_hash: str | None, ts: float) -> dict[str, str]:
    """The stream fields of one entry (for writers that batch their own commands)."""
    if not actor or not action:
        raise ValueError("audit entries need an actor and an action")
    return {
        "incident": incident_id, "ts": f"{ts:.6f}", "actor": actor[:MAX_TEXT],
        "action": action[:MAX_TEXT],
        "detail": json.dumps(detail, sort_keys=True, separators=(",", ":"), default=str),
        "evidence": evidence_hash or "",
    }


class AuditLog:
    """Append-only; readers get ``AuditEntry`` objects in time order."""

    def __init__(self, redis: Redis, *, clock: Callable[[], float] = time.time) -> None:
        self.redis = redis
        self.clock = clock

    def append(self, incident_id: str, actor: str, action: str, detail: dict[str, Any],
               evidence_hash: str | None = None) -> str:
        """Write one entry to the incident's stream and the global one; return its id."""
        with self.redis.pipeline(transaction=True) as pipe:
            self.add_to(pipe, incident_id, actor, action, detail, evidence_hash)
            results = pipe.execute()
        return _as_str(results[0])

    def add_to(self, pipe: Pipeline, incident_id: str, actor: str, action: str,
               detail: dict[str, Any], evidence_hash: str | None = None,
               ts: float | None = None) -> None:
        """Queue the entry in a caller's MULTI so it commits with the change it records."""
        fields = entry_fields(incident_id, actor, action, detail, evidence_hash,
                              self.clock() if ts is None else ts)
        pipe.xadd(keys.audit(incident_id), fields)  # type: ignore[arg-type]
        pipe.xadd(keys.audit_all(), fields, maxlen=GLOBAL_MAXLEN,  # type: ignore[arg-type]
                  approximate=True)

    def append_global(self, actor: str, action: str, detail: dict[str, Any]) -> str:
        """An action not tied to one incident (a silence): the global stream only."""
        fields = entry_fields("", actor, action, detail, None, self.clock())
        entry_id = self.redis.xadd(keys.audit_all(), fields,  # type: ignore[arg-type]
                                   maxlen=GLOBAL_MAXLEN, approximate=True)
        return _as_str(entry_id)

    def timeline(self, incident_id: str, count: int | None = None) -> list[AuditEntry]:
        rows = self.redis.xrange(keys.audit(incident_id), count=count)
        return [AuditEntry.from_stream(_as_str(i), _decode(f)) for i, f in rows]  # type: ignore[union-attr]

    def recent(self, count: int = 100) -> list[AuditEntry]:
        """The newest entries across all incidents, oldest first."""
        rows = self.redis.xrevrange(keys.audit_all(), count=count)
        entries = [AuditEntry.from_stream(_as_str(i), _decode(f)) for i, f in rows]  # type: ignore[union-attr]
        return entries[::-1]

    def between(self, start: float, end: float) -> list[AuditEntry]:
        """Entries across all incidents from ``start`` to ``end`` (ids are ms times)."""
        rows = self.redis.xrange(keys.audit_all(), min=str(int(start * 1000)),
                                 max=str(int(end * 1000)))
        return [AuditEntry.from_stream(_as_str(i), _decode(f)) for i, f in rows]  # type: ignore[union-attr]


def _as_str(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _decode(raw: Any) -> dict[str, str]:
    return {_as_str(k): _as_str(v) for k, v in dict(raw).items()}
