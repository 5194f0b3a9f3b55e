"""Boot id and disk checks, and the condition tracker that turns states into alerts.

A *condition* (disk full on /data, VRAM held idle) fires once when it starts and
resolves once when it ends; the set of active conditions is kept on disk so a restarted
agent still resolves what it raised. A reboot is an *event*: one alert per new boot id.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.core.durable import atomic_write

Alert = dict[str, Any]  # the generic webhook's shape (bot/ingest/webhook.py)


def make_alert(host: str, kind: str, subject: str, status: str, summary: str,
               details: Mapping[str, Any] | None = None, severity: str = "warning") -> Alert:
    """One webhook alert; ``id`` makes a retried delivery count once at the bot."""
    return {
        "host": host, "kind": kind, "status": status, "summary": summary[:500],
        "severity": severity, "source": "agent", "id": f"agent-{uuid.uuid4().hex}",
        "fingerprint": f"agent:{host}:{kind}:{subject}"[:200],
        "labels": {"subject": subject[:200]}, "details": dict(details or {}),
    }


# --- boot id --------------------------------------------------------------------------
def read_boot_id(path: Path) -> str:
    return path.read_text().strip()


def boot_changed(current: str, state_file: Path) -> str | None:
    """The previous boot id if it differs from ``current``; None on first run or same boot."""
    try:
        previous = state_file.read_text().strip()
    except FileNotFoundError:
        return None
    return previous if previous and previous != current else None


def reboot_alert(host: str, previous: str, current: str) -> Alert:
    return make_alert(host, "vm_restart", current, "firing",
                      f"{host} restarted (boot id changed)",
                      {"previous_boot_id": previous, "boot_id": current}, severity="critical")


# --- disk -----------------------------------------------------------------------------
@dataclass(frozen=True)
class DiskUsage:
    mount: str
    size_bytes: int
    avail_bytes: int
    files: int
    files_avail: int

    @property
    def used_pct(self) -> float:
        return 100.0 * (1 - self.avail_bytes / self.size_bytes) if self.size_bytes else 0.0

    @property
    def inodes_used_pct(self) -> float:
        return 100.0 * (1 - self.files_avail / self.files) if self.files else 0.0


def disk_usage(mount: str) -> DiskUsage:
    st = os.statvfs(mount)
    return DiskUsage(mount, st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize,
                     st.f_files, st.f_favail)


def disk_conditions(usages: list[DiskUsage], used_pct: float,
                    inodes_pct: float) -> dict[str, dict[str, Any]]:
    """subject → details for every mount over a threshold (space and inodes separately)."""
    out: dict[str, dict[str, Any]] = {}
    for u in usages:
        base = {"mount": u.mount, "used_pct": round(u.used_pct, 2), "size_bytes": u.size_bytes,
                "avail_bytes": u.avail_bytes, "inodes_used_pct": round(u.inodes_used_pct, 2)}
        if u.used_pct >= used_pct:
            out[f"space:{u.mount}"] = {**base, "summary": f"{u.mount} {u.used_pct:.1f}% full"}
        if u.inodes_used_pct >= inodes_pct:
            out[f"inodes:{u.mount}"] = {
                **base, "summary": f"{u.mount} {u.inodes_used_pct:.1f}% of inodes used"}
    return out


# --- conditions -----------------------------------------------------------------------
class Conditions:
    """Which (kind, subject) conditions are raised, persisted in ``state_dir``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.active: dict[str, list[str]] = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            self.active = {}

    def diff(self, host: str, kind: str, now: Mapping[str, dict[str, Any]],
             severity: str = "critical") -> list[Alert]:
        """Alerts for conditions that started (firing) or ended (resolved) since last time."""
        before = set(self.active.get(kind, []))
        alerts = [make_alert(host, kind, s, "firing", d.get("summary", f"{kind} {s}"),
                             {k: v for k, v in d.items() if k != "summary"}, severity)
                  for s, d in sorted(now.items()) if s not in before]
        alerts += [make_alert(host, kind, s, "resolved", f"{kind} {s} cleared")
                   for s in sorted(before - set(now))]
        self.active[kind] = sorted(now)
        return alerts

    def save(self) -> None:
        atomic_write(self.path, json.dumps(self.active, sort_keys=True))
