"""POST alerts to the bot with ``urllib`` (no third-party HTTP stack on the host)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int  # 0: no HTTP answer (connection refused, timeout, DNS)
    body: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def retryable(self) -> bool:
        """No answer, 408/429 or 5xx: keep the alerts and try again later."""
        return self.status in (0, 408, 429) or self.status >= 500


def post_alerts(url: str, token: str, alerts: list[dict[str, Any]], timeout_s: float) -> Reply:
    data = json.dumps(alerts).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}",
        "User-Agent": "incident-bot-agent"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return Reply(response.status, response.read(4096).decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, exc.read(4096).decode(errors="replace"))
    except (urllib.error.URLError, OSError) as exc:
        return Reply(0, str(getattr(exc, "reason", exc)))
