"""Alertmanager's webhook payload (version "4") → ``Alert``s. Pure.

Alertmanager resends every alert of a group on each notification, and an HA pair
sends each notification twice, so each alert's dedup identity is its fingerprint,
status and start time: the same firing alert is applied once, a later re-fire (a new
``startsAt``) counts again, and its resolution is applied once.
"""

from __future__ import annotations

import hashlib
from typing import Any

from bot.domain.incident import Alert, AlertStatus, parse_severity
from bot.ingest.mapping import TRIAGE, UNKNOWN_HOST, Mapper
from bot.ingest.schema import PayloadError, labels, load_json, obj, one_of, text

SOURCE = "alertmanager"
MAX_ALERTS = 5000


def parse(body: bytes, mapper: Mapper) -> list[Alert]:
    """Raise ``PayloadError`` with the offending field for anything we cannot use."""
    data = obj(load_json(body), "body")
    version = data.get("version")
    if version != "4":
        raise PayloadError(
            f'version: unsupported Alertmanager payload version {version!r} (want "4")')
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("alerts: expected an array of alerts")
    if len(alerts) > MAX_ALERTS:
        raise PayloadError(f"alerts: at most {MAX_ALERTS} per notification, got {len(alerts)}")
    receiver = text(data.get("receiver"), "receiver", limit=200)
    return [_alert(item, f"alerts[{i}]", mapper, receiver) for i, item in enumerate(alerts)]


def _fingerprint(label_set: dict[str, str]) -> str:
    """Alertmanager always sends one; this stands in for hand-made payloads."""
    canon = "\0".join(f"{k}\0{v}" for k, v in sorted(label_set.items()))
    return hashlib.sha1(canon.encode()).hexdigest()[:16]


def _alert(raw: Any, where: str, mapper: Mapper, receiver: str) -> Alert:
    item = obj(raw, where)
    status = AlertStatus(one_of(item.get("status"), f"{where}.status", ("firing", "resolved"),
                                "firing"))
    label_set = labels(item.get("labels"), f"{where}.labels")
    if not label_set:
        raise PayloadError(f"{where}.labels: an alert needs labels")
    notes = labels(item.get("annotations"), f"{where}.annotations")
    fingerprint = text(item.get("fingerprint"), f"{where}.fingerprint", limit=128)
    fingerprint = fingerprint or _fingerprint(label_set)
    starts_at = text(item.get("startsAt"), f"{where}.startsAt", limit=64)
    alertname = label_set.get("alertname", "")
    host = mapper.host_from_labels(label_set)
    kind = mapper.kind(alertname, label_set) if host else TRIAGE
    host = host or UNKNOWN_HOST
    summary = (notes.get("summary") or notes.get("description")
               or f"{alertname or 'alert'} on {host}")
    details = {"alertname": alertname, "annotations": notes, "starts_at": starts_at,
               "ends_at": text(item.get("endsAt"), f"{where}.endsAt", limit=64),
               "generator_url": text(item.get("generatorURL"), f"{where}.generatorURL", limit=500),
               "receiver": receiver}
    return Alert(
        source=SOURCE, host=host, kind=kind, status=status, summary=summary[:500],
        severity=parse_severity(label_set.get("severity")), labels=label_set, details=details,
        fingerprint=f"am:{fingerprint}", identity=f"am\0{fingerprint}\0{status}\0{starts_at}",
    )
