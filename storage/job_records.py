"""The job record in Redis (a hash), its event stream and its sample-failure book.

Works with a decoded or a bytes client (RQ's): values are written as strings and read
back through ``text``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis import Redis

from storage import keys

STREAM_MAXLEN = 5000
Fields = dict[str, str]


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read(conn: Redis, job_id: str) -> Fields:
    raw: dict[Any, Any] = conn.hgetall(keys.job_record(job_id))  # type: ignore[assignment]
    return {text(k): text(v) for k, v in raw.items()}


def write(conn: Redis, job_id: str, **fields: object) -> None:
    values = {k: ("" if v is None else str(v)) for k, v in fields.items()}
    conn.hset(keys.job_record(job_id), mapping=values)


def event(conn: Redis, job_id: str, kind: str, **fields: object) -> None:
    """Append to the job's stream (capped): what the incident thread renders."""
    body = {"type": kind, "t": f"{time.time():.3f}"}
    body.update({k: ("" if v is None else str(v)) for k, v in fields.items()})
    conn.xadd(keys.job_events(job_id), body, maxlen=STREAM_MAXLEN, approximate=True)  # type: ignore[arg-type]


def events_since(
    conn: Redis, job_id: str, since_id: str = "0-0", count: int = 1000
) -> list[dict[str, str]]:
    """Events after ``since_id`` (exclusive), each with its stream ``id``."""
    start = "(" + since_id if since_id not in ("0", "0-0", "-") else "-"
    rows: list[Any] = conn.xrange(keys.job_events(job_id), min=start, count=count)  # type: ignore[assignment]
    out: list[dict[str, str]] = []
    for entry_id, body in rows:
        item = {text(k): text(v) for k, v in body.items()}
        item["id"] = text(entry_id)
        out.append(item)
    return out


def control(conn: Redis, job_id: str) -> str | None:
    """``pause`` or ``cancel`` when a person asked the job to stop."""
    value = conn.get(keys.job_control(job_id))
    return text(value) if value is not None else None


def request(conn: Redis, job_id: str, what: str) -> None:
    """Ask a running job to ``pause`` or ``cancel`` (it reads this between batches)."""
    conn.set(keys.job_control(job_id), what)


def clear_request(conn: Redis, job_id: str) -> None:
    conn.delete(keys.job_control(job_id))


def add(conn: Redis, job_id: str, **counts: int) -> None:
    """Add to counters in the record (``computed``, ``partial_removed`` …)."""
    for name, n in counts.items():
        conn.hincrby(keys.job_record(job_id), name, n)


def mark_started(conn: Redis, job_id: str, now: str) -> None:
    """Count a start; the first one also sets ``first_started_at``."""
    conn.hsetnx(keys.job_record(job_id), "first_started_at", now)
    conn.hincrby(keys.job_record(job_id), "starts", 1)


class FailureBook:
    """Tries per sample, kept across runs, so a sample that always fails is skipped
    after ``max_tries`` instead of retried forever. Loaded once per run (it is small)."""

    def __init__(self, conn: Redis, job_id: str, max_tries: int) -> None:
        self.conn, self.key, self.max_tries = conn, keys.job_failures(job_id), max_tries
        raw: dict[Any, Any] = conn.hgetall(self.key)  # type: ignore[assignment]
        self.tries = {text(k): int(json.loads(text(v))["tries"]) for k, v in raw.items()}

    def exhausted(self, sample_id: str) -> bool:
        return self.tries.get(sample_id, 0) >= self.max_tries

    def record(self, sample_id: str, error: str) -> int:
        tries = self.tries.get(sample_id, 0) + 1
        self.tries[sample_id] = tries
        self.conn.hset(self.key, sample_id, json.dumps({"tries": tries, "error": error[:300]}))
        return tries

    @property
    def skipped(self) -> int:
        return sum(1 for t in self.tries.values() if t >= self.max_tries)


def failures(conn: Redis, job_id: str) -> dict[str, dict[str, Any]]:
    raw: dict[Any, Any] = conn.hgetall(keys.job_failures(job_id))  # type: ignore[assignment]
    return {text(k): json.loads(text(v)) for k, v in raw.items()}
