"""The generic JSON webhook (``POST /alerts``) → ``Alert``s. Pure.

Body: one object or an array of them::

    {"host": "gpu-01", "kind": "vram_idle", "summary": "...", "labels": {}, "details": {},
     "status": "firing|resolved", "severity": "critical", "fingerprint": "...", "id": "..."}

``host`` and ``kind`` are required; an unknown kind opens a ``triage`` incident (the
requested kind is kept in the labels). ``id`` makes redelivery safe: the same id is
applied once (the agent sends one per event). Unknown fields are refused, so a typo is
a 400 that names it rather than a silently ignored setting.
"""

from __future__ import annotations

import re
from typing import Any

from bot.domain.incident import Alert, AlertStatus, parse_severity
from bot.ingest.mapping import TRIAGE, Mapper
from bot.ingest.schema import PayloadError, labels, load_json, obj, one_of, text

FIELDS = frozenset({"host", "kind", "summary", "labels", "details", "status", "severity",
                    "fingerprint", "id", "source"})
SOURCES = ("webhook", "agent")
MAX_ALERTS = 1000
_KIND_TEXT = re.compile(r"[^A-Za-z0-9_.:-]")


def parse(body: bytes, mapper: Mapper) -> list[Alert]:
    data = load_json(body)
    items = data if isinstance(data, list) else [data]
    if not items:
        raise PayloadError("body: an empty array holds no alerts")
    if len(items) > MAX_ALERTS:
        raise PayloadError(f"body: at most {MAX_ALERTS} alerts per request, got {len(items)}")
    prefix = "" if not isinstance(data, list) else "[{}]"
    return [_alert(item, prefix.format(i) or "body", mapper) for i, item in enumerate(items)]


def _alert(raw: Any, where: str, mapper: Mapper) -> Alert:
    item = obj(raw, where)
    unknown = sorted(set(item) - FIELDS)
    if unknown:
        allowed = ", ".join(sorted(FIELDS))
        raise PayloadError(f"{where}: unknown field {unknown[0]!r} (allowed: {allowed})")
    raw_host = text(item.get("host"), f"{where}.host", required=True, limit=253).strip()
    host = mapper.host(raw_host)
    if host is None:
        raise PayloadError(f"{where}.host: invalid host name {raw_host[:60]!r}")
    requested = text(item.get("kind"), f"{where}.kind", required=True, limit=100).strip()
    label_set = labels(item.get("labels"), f"{where}.labels")
    kind = requested if mapper.known_kind(requested) else TRIAGE
    if kind != requested:
        label_set["requested_kind"] = _KIND_TEXT.sub("_", requested)
    details = item.get("details")
    details = {} if details is None else obj(details, f"{where}.details")
    status = one_of(item.get("status"), f"{where}.status", ("firing", "resolved"), "firing")
    ident = text(item.get("id"), f"{where}.id", limit=200)
    return Alert(
        source=one_of(item.get("source"), f"{where}.source", SOURCES, "webhook"),
        host=host, kind=kind, status=AlertStatus(status),
        summary=text(item.get("summary"), f"{where}.summary", limit=500) or f"{kind} on {host}",
        severity=parse_severity(text(item.get("severity"), f"{where}.severity", limit=40)),
        labels=label_set, details=details,
        fingerprint=text(item.get("fingerprint"), f"{where}.fingerprint", limit=200),
        identity=f"wh\0{ident}" if ident else None,
    )
