"""Host samples (GPU memory/utilisation, disk) as one Redis sorted set per host and metric.

Score = Unix time, member = ``"<ts>|<value>"`` (unique per sample, so a repeat write of
the same sample is idempotent). Old samples are trimmed on write and each key expires
after the retention, so a host that stops reporting vanishes on its own.

Metric names: ``gpu{i}.mem_used_mib``, ``gpu{i}.mem_total_mib``, ``gpu{i}.util_pct``,
``disk:{mount}.used_bytes``, ``disk:{mount}.size_bytes``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from redis import Redis

from bot.domain.validate import valid_host
from storage import keys

DEFAULT_RETENTION_S = 8 * 24 * 3600.0  # a weekly digest plus a day of slack
METRIC_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$")

Point = tuple[float, float]


def validate(host: str, metric: str, value: float) -> None:
    """Reject names that could not have come from a probe, and non-finite values."""
    if not valid_host(host):
        raise ValueError(f"bad host name for a sample: {host!r}")
    if not METRIC_RE.match(metric) or "|" in metric:
        raise ValueError(f"bad metric name: {metric!r}")
    if not math.isfinite(value):
        raise ValueError(f"sample value must be finite, got {value!r}")


class SampleStore:
    def __init__(self, redis: Redis, retention_s: float = DEFAULT_RETENTION_S) -> None:
        if retention_s <= 0:
            raise ValueError("retention_s must be positive")
        self.redis = redis
        self.retention_s = retention_s

    def add(self, host: str, metric: str, ts: float, value: float) -> None:
        self.add_many(host, ts, [(metric, value)])

    def add_many(self, host: str, ts: float, points: Iterable[tuple[str, float]]) -> int:
        """Store one probe's readings at one timestamp in a single round trip."""
        items = [(m, float(v)) for m, v in points]
        for metric, value in items:
            validate(host, metric, value)
        if not items:
            return 0
        ttl = math.ceil(self.retention_s)
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(keys.sample_hosts(), host)
        pipe.sadd(keys.sample_metrics(host), *[m for m, _ in items])
        pipe.expire(keys.sample_metrics(host), ttl)
        for metric, value in items:
            key = keys.samples(host, metric)
            pipe.zadd(key, {f"{ts:.3f}|{value!r}": ts})
            pipe.zremrangebyscore(key, "-inf", f"({ts - self.retention_s}")
            pipe.expire(key, ttl)
        pipe.execute()
        return len(items)

    def range(self, host: str, metric: str, start: float, end: float) -> list[Point]:
        """Samples with ``start <= ts <= end``, oldest first."""
        rows: Any = self.redis.zrangebyscore(keys.samples(host, metric), start, end)
        return [_parse(_text(row)) for row in rows]

    def hosts(self) -> list[str]:
        return sorted(_text(h) for h in self.redis.smembers(keys.sample_hosts()))  # type: ignore[union-attr]

    def metrics(self, host: str) -> list[str]:
        return sorted(_text(m) for m in self.redis.smembers(keys.sample_metrics(host)))  # type: ignore[union-attr]

    def host_series(self, host: str, start: float, end: float) -> dict[str, list[Point]]:
        """Every metric of one host over a window (what a digest reads)."""
        names = self.metrics(host)
        pipe = self.redis.pipeline(transaction=False)
        for metric in names:
            pipe.zrangebyscore(keys.samples(host, metric), start, end)
        out: dict[str, list[Point]] = {}
        for metric, rows in zip(names, pipe.execute(), strict=True):
            if rows:
                out[metric] = [_parse(_text(r)) for r in rows]
        return out


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _parse(member: str) -> Point:
    ts, _, value = member.partition("|")
    return float(ts), float(value)
