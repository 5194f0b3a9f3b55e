"""Maintenance windows: silences that recur every week, per host glob and alert kind. Pure.

A window ("Sat 02:00-04:00 UTC" for ``gpu-0*``) comes from the config (``maintenance:``)
and is stored in Redis as one JSON list (``storage/silences.py``), so every replica's
ingest reads the same list in the MGET it already makes. A firing alert inside a window
is recorded in the audit stream and not posted (``bot/domain/planner.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from bot.domain.windows import WeeklyWindow, WindowError, parse_window


@dataclass(frozen=True)
class MaintenanceWindow:
    hosts: str  # a host glob
    kinds: tuple[str, ...]  # alert kinds; empty: every kind
    window: WeeklyWindow
    reason: str = ""

    def covers(self, host: str, kind: str, now: float) -> bool:
        return (fnmatchcase(host, self.hosts) and (not self.kinds or kind in self.kinds)
                and self.window.contains(now))

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": self.hosts, "kinds": list(self.kinds), "every": self.window.text,
                "reason": self.reason}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> MaintenanceWindow:
        return cls(str(raw.get("hosts", "*")), tuple(str(k) for k in raw.get("kinds") or ()),
                   parse_window(str(raw["every"])), str(raw.get("reason", "")))


def in_window(windows: Iterable[MaintenanceWindow], host: str, kind: str,
              now: float) -> MaintenanceWindow | None:
    """The first window covering (host, kind) at ``now``, if any."""
    return next((w for w in windows if w.covers(host, kind, now)), None)


def windows_to_json(windows: Iterable[MaintenanceWindow]) -> str:
    return json.dumps([w.to_dict() for w in windows], separators=(",", ":"), sort_keys=True)


def windows_from_json(text: str | None) -> tuple[MaintenanceWindow, ...]:
    """The stored list; an entry that no longer parses (a zone gone from tzdata) is
    skipped rather than stopping ingest: a missed window posts, never drops, an alert."""
    if not text:
        return ()
    out = []
    for raw in json.loads(text):
        try:
            out.append(MaintenanceWindow.from_dict(raw))
        except (WindowError, KeyError, TypeError):
            continue
    return tuple(out)
