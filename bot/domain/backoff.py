"""The one backoff rule for everything that tries again later without sleeping: the chat
outbox, the paging outbox, the host agent's unsent alerts.

Exponential and capped (``base``, 2·``base``, 4·``base`` … ``cap`` after the 1st, 2nd,
3rd … failure), and a server's ``Retry-After`` (seconds, or an HTTP date) wins when it
sent one. Pure: callers turn the seconds into a due time; none of them sleeps on it.

Kept as twenty lines of our own rather than ``tenacity``/``backoff``: those libraries
run the retry loop themselves (a decorator that sleeps between attempts), which is
exactly what an outbox must not do; all they would add here is this arithmetic.
Calls that may wait (Slack's, through slack_sdk's handlers) use the library's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class Backoff:
    base_s: float
    cap_s: float

    def after(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row (1: ``base_s``)."""
        return min(self.cap_s, self.base_s * 2 ** max(0, failures - 1))

    def or_retry_after(self, header: str | None, failures: int, now: float = 0.0) -> float:
        """The server's ``Retry-After`` when it sent a usable one (capped), else ``after``."""
        asked = retry_after_s(header, now)
        return min(self.cap_s, asked) if asked is not None else self.after(failures)


def retry_after_s(header: str | None, now: float = 0.0) -> float | None:
    """A ``Retry-After`` value in seconds: a number, or an HTTP date (``now`` is the
    caller's clock); None when absent or unreadable."""
    if not header:
        return None
    try:
        value = float(header)
    except ValueError:
        try:
            value = parsedate_to_datetime(header).timestamp() - now if now else -1.0
        except (TypeError, ValueError):
            return None
    return value if value >= 0 else None
