"""Alerts other parts of the bot send must parse as the webhook's own shape."""

from __future__ import annotations

import json

from bot.domain.incident import AlertStatus, Severity
from bot.extract.alerts import alert_body
from bot.ingest.mapping import Mapper
from bot.ingest.webhook import parse


def test_extraction_disk_full_alert_is_a_valid_generic_webhook_body() -> None:
    body = alert_body({"job_id": "ex-1", "path": "/data/out", "host": "gpu-01",
                       "summary": "disk full during extraction", "free_bytes": 0})
    [alert] = parse(json.dumps(body).encode(), Mapper({}, {"gpu-01": "root@10.0.0.1:22"}))
    assert (alert.host, alert.kind, alert.status) == ("gpu-01", "disk_full", AlertStatus.FIRING)
    assert alert.severity is Severity.CRITICAL
    assert alert.labels["job_id"] == "ex-1"
