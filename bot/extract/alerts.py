"""Disk-full alerts from a job: a pause alone would go unnoticed, so tell the bot.

The default poster sends one generic alert (the shape ``/alerts`` normalises: host,
kind, status, summary, severity, labels, details) to the URL configured for the worker
(``extra.extract.alerts_url`` or ``INCIDENT_BOT_ALERTS_URL``), with the alert token from
the environment. No URL configured: the pause and the stream event are the only signal.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import httpx

log = logging.getLogger(__name__)
DiskFullHook = Callable[[dict[str, Any]], None]
_config: dict[str, str | None] = {"url": None}


def configure(url: str | None) -> None:
    """Set by the worker before it forks work horses (they inherit it)."""
    _config["url"] = url


def alert_body(info: dict[str, Any]) -> dict[str, Any]:
    """Pure: the generic alert for a job paused by a full disk."""
    return {
        "host": info["host"],
        "kind": "disk_full",
        "status": "firing",
        "severity": "critical",
        "summary": info["summary"],
        "labels": {"job_id": info["job_id"], "path": info["path"], "source": "extraction"},
        "details": {k: v for k, v in info.items() if k not in ("summary",)},
    }


def post_disk_full(info: dict[str, Any]) -> None:
    """Default hook: POST the alert if a URL is configured; failures are logged, not raised."""
    url = _config["url"] or os.environ.get("INCIDENT_BOT_ALERTS_URL")
    if not url:
        log.warning("disk full on %s but no alerts URL is configured", info.get("host"))
        return
    token = os.environ.get("INCIDENT_BOT_ALERT_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        httpx.post(url, json=alert_body(info), headers=headers, timeout=5.0).raise_for_status()
    except httpx.HTTPError as exc:
        log.warning("disk_full alert to %s failed: %s", url, exc)
