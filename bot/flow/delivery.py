"""A delivered card as the flow's event: the chat outbox reports where the incident's
card now is (its ``on_delivered``, wired here by ``bot/flow/assembly.py``), and
``FlowRunner.handle(CardDelivered)`` keeps it on the incident and attaches the plans'
approvals to that message. The chat layer only delivers; it never writes the incident.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.chat.base import MessageRef
from bot.chat.outbox import CARD, ChatOutbox
from bot.domain.flow import CardDelivered
from bot.domain.incident_record import ChatRefs
from bot.flow.runner import FlowRunner
from storage.incidents import UnknownIncident


class CardDeliveries:
    """The outbox's ``on_delivered`` for the flow, whichever replica or retry delivered."""

    def __init__(self, runner: FlowRunner, outbox: ChatOutbox, *, bot_user: str,
                 clock: Callable[[], float] = time.time) -> None:
        self.runner, self.outbox = runner, outbox
        self.bot_user, self.clock = bot_user, clock
        # told each card this process delivered, in memory, before Redis records it (the
        # data-loss watch: a wipe may take the record a moment later, issue 39)
        self.watchers: list[Callable[[str], None]] = []

    def delivered(self, incident_id: str, purpose: str, ref: MessageRef) -> None:
        """Only the incident's own card is kept; its thread is where the outbox put it (its
        own, its group parent's, or a storm's table)."""
        if purpose != CARD:
            return
        for watcher in self.watchers:
            watcher(incident_id)
        posted = self.outbox.posted(incident_id, CARD)
        chat = ChatRefs(ref.channel, ref.ts, posted.thread_ts if posted else ref.ts)
        try:
            self.runner.handle(incident_id, CardDelivered(self.clock(), self.bot_user, chat))
        except UnknownIncident:
            return  # a card of an incident gone from Redis: nothing to remember it on
