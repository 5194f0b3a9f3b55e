"""The hand-off from ingest to the rest of the bot: a Redis stream with consumer groups.

Ingest appends ``incident.opened`` (a new top-level incident or group parent: one chat
message), ``incident.folded``, ``incident.grouped`` (a host joined a parent),
``incident.resolved`` and ``incident.alert_cleared`` (the alert resolved but the
incident's state keeps it open) in the same transaction as the change. People's clicks
come this way too (issue 34: the chat layer never calls the flow): ``click.approved``,
``click.denied`` and ``click.expired`` in the claim's own script (``storage.approvals``),
``click.<verb>`` (ack, resolve, snooze, retry, escalate) once the desk checked who asks.
Any replica may consume: a consumer group hands each entry to one consumer, and entries
stay pending until acknowledged, so a crash between read and ack means a redelivery, not a loss.

Each entry is a flat dict: ``type`` (the event), ``incident_id``, then the fields
(``host``, ``kind``, ...).

Redis may lose the stream and its groups (restarted without its data, a failover to an
empty replica): a group read then answers NOGROUP. The group is created again at once and
the read retried, so the next alert is handled, and ``on_lost_group`` is told (the flow's
data-loss watch), instead of failing every read for good with a cached "it exists".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import ResponseError

from storage import keys

MAXLEN = 100_000  # approximate cap; consumers keep up or read pending entries first

Entry = tuple[str, dict[str, str]]
CLICK = "click."  # the prefix of every click event
CLICK_APPROVED, CLICK_DENIED, CLICK_EXPIRED = "click.approved", "click.denied", "click.expired"
T = TypeVar("T")


def lost_group(exc: BaseException) -> bool:
    """Redis says the stream or its group is not there (it lost its data)."""
    return isinstance(exc, ResponseError) and str(exc).startswith("NOGROUP")


def _s(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entries(rows: Any) -> list[Entry]:
    return [(_s(i), {_s(k): _s(v) for k, v in dict(f or {}).items()}) for i, f in rows]


def event_fields(kind: str, incident_id: str, fields: dict[str, object]) -> dict[str, str]:
    """The stream fields of one event (for writers that batch their own commands)."""
    out = {k: str(v) for k, v in fields.items()}
    out["type"] = kind
    out["incident_id"] = incident_id
    return out


class IncidentEvents:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.stream = keys.incident_events()
        self._groups: set[str] = set()
        # told (group name) when a read found the group gone and made it again
        self.on_lost_group: Callable[[str], object] | None = None

    def publish(self, kind: str, incident_id: str, /, **fields: object) -> str:
        entry_id = self.redis.xadd(self.stream, event_fields(kind, incident_id, fields),  # type: ignore[arg-type]
                                   maxlen=MAXLEN, approximate=True)
        return _s(entry_id)

    def add_to(self, pipe: Pipeline, kind: str, incident_id: str,
               fields: dict[str, object]) -> None:
        """Queue an event in a caller's MULTI so it commits with the change it announces."""
        pipe.xadd(self.stream, event_fields(kind, incident_id, fields),  # type: ignore[arg-type]
                  maxlen=MAXLEN, approximate=True)

    def click(self, verb: str, incident_id: str, user: str, *, duration_s: int = 0,
              channel: str = "") -> str:
        """An incident-level click (``click.ack``…) the desk allowed, for the flow to
        apply; ``channel``: where the person clicked, to answer them there."""
        return self.publish(CLICK + verb, incident_id, user=user, duration_s=duration_s,
                            channel=channel)

    def ensure_group(self, group: str, start: str = "0") -> None:
        """Create the consumer group once (``0``: a new group also gets what is there)."""
        if group in self._groups:
            return
        try:
            self.redis.xgroup_create(self.stream, group, id=start, mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._groups.add(group)

    def _in_group(self, group: str, read: Callable[[], T]) -> T:
        """``read`` on the group; when Redis lost it (NOGROUP), make it again and retry once."""
        self.ensure_group(group)
        try:
            return read()
        except ResponseError as exc:
            if not lost_group(exc):
                raise
        self._groups.discard(group)
        self.ensure_group(group)
        if self.on_lost_group is not None:
            self.on_lost_group(group)
        return read()

    def consume(self, group: str, consumer: str, block_ms: int | None = None,
                count: int = 100) -> list[Entry]:
        """New entries for this consumer; ``block_ms`` waits for some (None: don't wait)."""
        reply = self._in_group(group, lambda: self.redis.xreadgroup(
            group, consumer, {self.stream: ">"}, count=count, block=block_ms))
        return _entries(reply[0][1]) if reply else []  # type: ignore[index]

    def pending(self, group: str, consumer: str, count: int = 100) -> list[Entry]:
        """Entries delivered to this consumer and not acknowledged (read after a restart)."""
        reply = self._in_group(group, lambda: self.redis.xreadgroup(
            group, consumer, {self.stream: "0"}, count=count))
        return _entries(reply[0][1]) if reply else []  # type: ignore[index]

    def claim_stale(self, group: str, consumer: str, min_idle_ms: int,
                    count: int = 100) -> list[Entry]:
        """Take over entries another consumer read and never acknowledged (it died)."""
        reply = self._in_group(group, lambda: self.redis.xautoclaim(
            self.stream, group, consumer, min_idle_ms, count=count))
        return _entries([r for r in reply[1] if r])  # type: ignore[index]

    def ack(self, group: str, *entry_ids: str) -> int:
        if not entry_ids:
            return 0
        return int(self.redis.xack(self.stream, group, *entry_ids))  # type: ignore[arg-type]

    def read(self, after: str = "0", count: int = 1000) -> list[Entry]:
        """Plain read without a group (tools, tests, the benchmark)."""
        reply = self.redis.xread({self.stream: after}, count=count)
        return _entries(reply[0][1]) if reply else []  # type: ignore[index]

    def count(self, kind: str | None = None) -> int:
        """How many entries (of one type) the stream holds; scans, so for tools and tests."""
        if kind is None:
            return int(self.redis.xlen(self.stream))  # type: ignore[arg-type]
        total, after = 0, "-"
        while True:
            rows = _entries(self.redis.xrange(self.stream, min=after, count=5000))
            rows = [r for r in rows if r[0] != after]
            if not rows:
                return total
            total += sum(1 for _, f in rows if f.get("type") == kind)
            after = rows[-1][0]
