"""A chat backend for flow tests: it keeps every post, edit and private answer, with where
they went."""

from __future__ import annotations

import itertools
from pathlib import Path

from bot.chat.base import ChatMessage, Ephemeral, MessageRef


class RecordingChat:
    """A ChatBackend that keeps what was posted, where, and in which thread."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, ChatMessage, MessageRef | None, MessageRef]] = []
        self.updates: list[tuple[MessageRef, ChatMessage]] = []
        self.ephemerals: list[Ephemeral] = []
        self._ts = itertools.count(1)

    def post(self, channel: str, message: ChatMessage,
             thread: MessageRef | None = None) -> MessageRef:
        ref = MessageRef(channel, f"{next(self._ts)}.000")
        self.posts.append((channel, message, thread, ref))
        return ref

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        self.updates.append((ref, message))

    def ephemeral(self, note: Ephemeral) -> None:
        self.ephemerals.append(note)

    def upload(self, ref: MessageRef, path: Path, title: str) -> None:
        pass

    def last_version(self, ref: MessageRef) -> ChatMessage:
        """The message at ``ref`` as it reads now (its newest edit, else its post)."""
        edits = [m for r, m in self.updates if r == ref]
        return edits[-1] if edits else next(m for _, m, _, r in self.posts if r == ref)
