"""A chat backend that writes every message to a JSON-lines file (docs/extending.md).

A package registers it in its own ``pyproject.toml``::

    [project.entry-points."incident_bot.chat_backends"]
    jsonl = "jsonl_chat:JsonlChat"

and the bot's config chooses it with ``chat_backend: jsonl``. The file is named by the
environment (``INCIDENT_BOT_JSONL_CHAT``), as every setting a backend adds of its own.
It has no interactive side: nobody can click Approve in a file, so its incidents wait for
a fleet policy, ``incident-bot act`` or another replica's Slack.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path
from typing import Any, ClassVar

from bot.chat.base import ChatBackend, ChatMessage, Ephemeral, MessageRef
from bot.config.settings import Settings

ENV = "INCIDENT_BOT_JSONL_CHAT"


class JsonlBackend:
    """``ChatBackend``: each post, edit, private note and upload is one JSON line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._ts = itertools.count(1)
        self._lock = threading.Lock()

    def post(self, channel: str, message: ChatMessage,
             thread: MessageRef | None = None) -> MessageRef:
        ref = MessageRef(channel, f"{next(self._ts)}")
        self._write({"op": "post", "channel": channel, "ts": ref.ts,
                     "thread": thread.ts if thread else None, **_shown(message)})
        return ref

    def update(self, ref: MessageRef, message: ChatMessage) -> None:
        self._write({"op": "update", "channel": ref.channel, "ts": ref.ts, **_shown(message)})

    def ephemeral(self, note: Ephemeral) -> None:
        self._write({"op": "ephemeral", "user": note.user, "text": note.text})

    def upload(self, ref: MessageRef, path: Path, title: str) -> None:
        self._write({"op": "upload", "ts": ref.ts, "file": str(path), "title": title})

    def _write(self, entry: dict[str, Any]) -> None:
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")


def _shown(message: ChatMessage) -> dict[str, Any]:
    return {"text": message.text, "header": message.header,
            "sections": [s.text for s in message.sections],
            "buttons": [b.label for s in message.sections for b in s.buttons]
            + [b.label for b in message.buttons],
            "incident": message.incident_id}


class JsonlChat:
    """The plugin: made from the settings (it unpacks what it needs), it builds the
    backend; no usergroups, no interactive side."""

    name: ClassVar[str] = "jsonl"

    def __init__(self, settings: Settings, **_: Any) -> None:
        self.path = Path(os.environ.get(ENV, "incident-bot-chat.jsonl"))

    def backend(self) -> ChatBackend:
        return JsonlBackend(self.path)

    def groups(self, chat: ChatBackend) -> None:
        return None

    def app(self, chat: ChatBackend, **_: Any) -> None:
        return None

    @classmethod
    def missing_secrets(cls, settings: Settings) -> list[tuple[str, str]]:
        return [] if os.environ.get(ENV) else [(ENV, "the file the messages are written to")]
