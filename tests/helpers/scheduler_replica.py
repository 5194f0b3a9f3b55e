"""One bot replica's scheduler, as its own process (the SIGKILL takeover test runs two).

Usage: ``python -m tests.helpers.scheduler_replica REDIS_URL PERIOD_S TTL_S RENEW_S``.
Each digest firing appends ``<slot>|<pid>`` to the Redis list ``test:posts``; each
escalation firing runs a real ``Escalator`` whose chat backend appends to ``test:chat``.
Runs until killed.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from bot.chat.base import ChatMessage, Ephemeral, MessageRef
from bot.schedule.escalation import Escalator, StoreCandidates, Target
from bot.schedule.leader import Firing, LeaderScheduler, ScheduledJob
from storage.connection import connect
from storage.stores import open_stores

POSTS = "test:posts"
CHAT = "test:chat"


class ListChat:
    """A chat backend that appends each post to a Redis list (visible across processes)."""

    def __init__(self, url: str) -> None:
        self.redis = connect(url)

    def post(
        self, channel: str, message: ChatMessage, thread: MessageRef | None = None
    ) -> MessageRef:
        n = self.redis.rpush(CHAT, f"{os.getpid()}|{channel}|{message.incident_id}|{message.text}")
        return MessageRef(channel, f"{n}.0")

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        raise NotImplementedError

    def ephemeral(self, note: Ephemeral) -> None:
        raise NotImplementedError

    def upload(self, ref: MessageRef, path: Path, title: str) -> None:
        raise NotImplementedError


def main(url: str, period_s: float, ttl_s: float, renew_s: float) -> None:
    redis = connect(url)
    stores = open_stores(url)
    escalator = Escalator(
        stores.claims(),
        ListChat(url),
        StoreCandidates(stores.incidents(), stores.audit()),
        Target("C0ESCALATE"),
        after_s=0.5,
    )

    def digest(firing: Firing) -> None:
        redis.rpush(POSTS, f"{firing.slot_id}|{os.getpid()}")

    def escalate(firing: Firing) -> None:
        escalator.run()

    jobs = [
        ScheduledJob("digest", digest, every_s=period_s),
        ScheduledJob("escalation", escalate, every_s=period_s),
    ]
    LeaderScheduler(stores.claims(), stores.scheduler_lease(ttl_s), jobs, renew_s=renew_s,
                    catchup_s=30).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
