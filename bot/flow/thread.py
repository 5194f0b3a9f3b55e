"""Where an incident lives in chat: its own message, its thread, and replies in it.

Lower than every step: diagnose, approve, act and progress all post through here, so no
step imports another to reach the thread.
"""

from __future__ import annotations

import time

from bot.chat.base import ChatMessage, MessageRef, Section
from bot.domain.incident import Incident
from bot.flow.context import FlowContext


def message_ref(incident: Incident) -> MessageRef | None:
    """The incident's own message (edited in place)."""
    chat = incident.chat
    return MessageRef(chat.channel, chat.ts) if chat is not None else None


def thread_ref(incident: Incident) -> MessageRef | None:
    """Where its replies go: its own thread, or its group parent's for a grouped host."""
    chat = incident.chat
    return MessageRef(chat.channel, chat.thread_ts) if chat is not None else None


def note(text: str, code: str | None = None) -> ChatMessage:
    return ChatMessage(text=text, sections=(Section(text, code=code),))


def post_in_thread(ctx: FlowContext, incident: Incident, text: str,
                   code: str | None = None) -> MessageRef | None:
    """A reply in the incident's thread (its group parent's, for a grouped host)."""
    ref = thread_ref(incident)
    return ctx.chat.post(ref.channel, note(text, code), thread=ref) if ref is not None else None


def where_to_post(ctx: FlowContext, incident: Incident,
                  wait_s: float = 15.0) -> tuple[str, MessageRef | None]:
    """A grouped child is posted in its parent's thread (one channel message per group);
    another replica may still be posting the parent, so wait a little for its message."""
    if not incident.parent_id:
        return ctx.channel, None
    deadline = time.monotonic() + wait_s
    while True:
        parent = ctx.incidents.get(incident.parent_id)
        ref = message_ref(parent) if parent is not None else None
        if ref is not None or time.monotonic() >= deadline:
            return (ref.channel, ref) if ref is not None else (ctx.channel, None)
        time.sleep(0.2)
