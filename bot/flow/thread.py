"""Where an incident lives in chat: its own message and the thread its replies go to (pure).

Lower than every step: the publisher posts through these, so no step imports another
to reach the thread.
"""

from __future__ import annotations

from bot.chat.base import ChatMessage, MessageRef, Section
from bot.chat.text import in_gib
from bot.domain.incident import Incident


def message_ref(incident: Incident) -> MessageRef | None:
    """The incident's own message (edited in place)."""
    chat = incident.chat
    return MessageRef(chat.channel, chat.ts) if chat is not None else None


def thread_ref(incident: Incident) -> MessageRef | None:
    """Where its replies go: its own thread, or its group parent's for a grouped host."""
    chat = incident.chat
    return MessageRef(chat.channel, chat.thread_ts) if chat is not None else None


def note(text: str, code: str | None = None) -> ChatMessage:
    """A thread reply in the message's units: a verification's ``max 77604 MiB`` reads
    ``max 75.8 GiB`` there too (one unit family per message, thread included)."""
    text, code = in_gib(text), in_gib(code) if code is not None else None
    return ChatMessage(text=text, sections=(Section(text, code=code),))
