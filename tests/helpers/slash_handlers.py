"""``/ir`` handlers for tests: the job lookup goes to the real job store, decisions and
silences are recorded (what the bot's flow does with them is tested elsewhere)."""

from __future__ import annotations

from typing import Any

from bot.chat.slash import SlashReply, Unavailable
from bot.jobs import queue
from storage.connection import connect
from storage.jobs import JobStore


class StoreHandlers(Unavailable):
    def __init__(self, redis_url: str) -> None:
        self.redis_bytes = connect(redis_url, decode=False)
        self.calls: list[tuple[Any, ...]] = []

    def close(self) -> None:
        self.redis_bytes.close()

    def job(self, user: str, job_id: str) -> SlashReply:
        return SlashReply(str(queue.status(JobStore(self.redis_bytes), job_id)))

    def silence(self, user: str, host: str, kind: str, duration_s: int) -> SlashReply:
        self.calls.append(("silence", user, host, kind, duration_s))
        return SlashReply("silenced")

    def diag(self, user: str, host: str, playbook: str | None) -> SlashReply:
        self.calls.append(("diag", user, host, playbook))
        return SlashReply("diagnosing")

    def decide(self, user: str, verb: str, incident_id: str, duration_s: int, *,
               channel: str = "") -> SlashReply:
        self.calls.append((verb, user, incident_id, duration_s))
        return SlashReply("done")
