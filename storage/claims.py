"""The one ``SET key NX`` claim: first caller wins, the key expires on its own.

Used wherever "exactly one replica does this" is decided: the scheduler's per-slot firing
guard, escalation's once-per-incident post, the chat per-message spacing
(``storage/slack_budget.py``), the leases (``storage/leases.py``), a signed Slack request
accepted once (its timestamp and signature, for Slack's five-minute window), the data
epoch (``storage/epoch.py``, no expiry) and the one announcement of a data loss.
"""

from __future__ import annotations

from redis import Redis


def claim(conn: Redis, key: str, value: str, ttl_s: float | None) -> bool:
    """Take ``key`` for ``ttl_s`` seconds (None: for good); False when someone else holds it."""
    if ttl_s is None:
        return bool(conn.set(key, value, nx=True))
    return bool(conn.set(key, value, nx=True, px=max(1, int(ttl_s * 1000))))


def unclaim(conn: Redis, key: str) -> None:
    """Give a claim back (the work it guarded failed and should be tried again)."""
    conn.delete(key)


class Claims:
    """``claim``/``unclaim`` on one connection: what code above storage/ holds (the
    scheduler's firing guard, escalation's once-per-incident post) instead of a client.
    Keys come from ``storage/keys.py``."""

    def __init__(self, conn: Redis) -> None:
        self._conn = conn

    def claim(self, key: str, value: str, ttl_s: float | None) -> bool:
        """Take ``key`` for ``ttl_s`` seconds (None: for good); False when someone else
        holds it."""
        return claim(self._conn, key, value, ttl_s)

    def unclaim(self, key: str) -> None:
        """Give the claim back: the work it guarded failed and should be tried again."""
        unclaim(self._conn, key)
