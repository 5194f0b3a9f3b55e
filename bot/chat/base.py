"""The chat side-effect interface and the pure message model every backend renders.

Backends (errbot style, one module each, chosen by ``settings.chat_backend``):
``bot.chat.slack`` (Slack Web API, base URL from settings) and ``bot.chat.terminal``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


class ButtonStyle(StrEnum):
    PRIMARY = "primary"
    DANGER = "danger"
    DEFAULT = "default"


@dataclass(frozen=True)
class Button:
    label: str
    action_id: str  # "approve" | "deny" | "revert" | ...
    value: str  # opaque approval id, never the command itself
    style: ButtonStyle = ButtonStyle.DEFAULT
    confirm: str | None = None  # confirm-dialog text for destructive actions
    url: str | None = None  # a link button (a runbook): opens the page, the click is only acked


@dataclass(frozen=True)
class Section:
    text: str  # mrkdwn-ish; backends adapt
    fields: tuple[str, ...] = ()
    code: str | None = None  # preformatted block (commands, GPU tables)
    buttons: tuple[Button, ...] = ()  # shown right under this section (one action's Approve/Deny)
    accessory: Button | None = None  # beside the text, in the same block (a table row's button)


@dataclass(frozen=True)
class ChatMessage:
    """What a person sees: header, sections, buttons. Pure data, rendered per backend."""

    text: str  # plain fallback / notification text
    header: str | None = None
    sections: tuple[Section, ...] = ()
    buttons: tuple[Button, ...] = ()
    context: tuple[str, ...] = ()  # small grey lines (state, who approved, ids)
    incident_id: str = ""  # for the audit trail when delivery finally fails
    seq: int = 0  # render sequence number of an incident message (0: not one)


@dataclass(frozen=True)
class MessageRef:
    """Where a posted message lives, so later steps edit it and reply in its thread."""

    channel: str
    ts: str


@dataclass
class Ephemeral:
    user: str
    text: str
    channel: str = ""
    extra: dict[str, str] = field(default_factory=dict)


class ChatBackend(Protocol):
    def post(self, channel: str, message: ChatMessage,
             thread: MessageRef | None = None) -> MessageRef: ...

    def update(self, ref: MessageRef, message: ChatMessage) -> None: ...

    def ephemeral(self, note: Ephemeral) -> None: ...

    def upload(self, ref: MessageRef, path: Path, title: str) -> None:
        """Attach a file (a digest chart) in the message's thread."""
        ...


# --- one delivery attempt, classified (issue 24: the chat outbox) -------------------------
class ChatSendError(Exception):
    """One send that did not go through, said in the terms the outbox decides on:
    ``transient`` (5xx, 429, timeouts, refused connections: try again later, after
    ``retry_after_s`` when Slack said so) or permanent (``channel_not_found``,
    ``invalid_blocks`` …: trying again cannot help). ``uncertain``: the request may have
    reached Slack (a timeout or a reset connection), so look before posting again.
    ``throttled``: not Slack's refusal but our own shared budget's spacing (no audit)."""

    def __init__(self, error: str, *, transient: bool, retry_after_s: float | None = None,
                 uncertain: bool = False, throttled: bool = False) -> None:
        super().__init__(error)
        self.error, self.transient = error, transient
        self.retry_after_s, self.uncertain, self.throttled = retry_after_s, uncertain, throttled
