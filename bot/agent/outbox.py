"""The on-disk buffer: every alert is a file until the bot has acknowledged it.

An alert is written (fsync, rename) before any attempt to send it, and deleted only
after a 2xx, so a bot outage, a network cut or an agent crash delays alerts but never
drops them. The bot deduplicates on each alert's ``id``, so a resend after a lost
acknowledgement counts once. A file the bot refuses as malformed (400) is moved to
``rejected/`` with the reason, so one bad alert cannot block the rest.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

from bot.core.durable import atomic_write, fsync_dir

log = logging.getLogger(__name__)


class Outbox:
    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "outbox"
        self.rejected = state_dir / "rejected"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rejected.mkdir(parents=True, exist_ok=True)

    def put(self, alert: dict[str, Any]) -> Path:
        path = self.dir / f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"
        atomic_write(path, json.dumps(alert, sort_keys=True))
        fsync_dir(self.dir)
        return path

    def pending(self, limit: int) -> list[tuple[Path, dict[str, Any]]]:
        """Oldest first; unreadable files are set aside, not retried forever."""
        out: list[tuple[Path, dict[str, Any]]] = []
        for path in sorted(self.dir.glob("*.json"))[:limit]:
            try:
                out.append((path, json.loads(path.read_text())))
            except (OSError, json.JSONDecodeError) as exc:
                self.reject(path, f"unreadable: {exc}")
        return out

    def __len__(self) -> int:
        return sum(1 for _ in self.dir.glob("*.json"))

    def remove(self, paths: list[Path]) -> None:
        for path in paths:
            path.unlink(missing_ok=True)
        fsync_dir(self.dir)

    def reject(self, path: Path, reason: str) -> None:
        log.error("alert %s refused, moved to %s: %s", path.name, self.rejected, reason)
        os.replace(path, self.rejected / path.name)
        (self.rejected / f"{path.name}.reason").write_text(reason[:2000])
