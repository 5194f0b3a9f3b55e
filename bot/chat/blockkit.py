"""``ChatMessage`` → Slack Block Kit, always within Slack's limits (pure).

Slack rejects a whole message when one limit is exceeded, so every text is clipped here
and, when a message would need more than 50 blocks, content sections are dropped before
buttons (a person must always be able to approve or deny), with a note saying how many
blocks were left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from bot.chat.base import Button, ButtonStyle, ChatMessage, Section
from bot.chat.text import FENCE, clip, inline_code, visible
from bot.core import fmt, strings

MAX_BLOCKS = 50
SECTION_TEXT = 3000
FIELD_TEXT = 2000
MAX_FIELDS = 10
HEADER_TEXT = 150
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
ACTION_ID = 255
MAX_ELEMENTS = 25  # per actions block
CONTEXT_ELEMENTS = 10
CONFIRM_TITLE, CONFIRM_TEXT, CONFIRM_BUTTON = 100, 300, 30
FALLBACK_TEXT = 4000
MODAL_TITLE = 24
DENY_CALLBACK = "deny_reason"
REASON_BLOCK, REASON_INPUT = "reason", "reason_input"

Block = dict[str, Any]


def to_payload(message: ChatMessage) -> dict[str, Any]:
    """Arguments for chat.postMessage / chat.update: fallback text plus blocks, every text
    shown with its hidden characters spelled out (before the limits cut it to size)."""
    message = visible_message(message)
    fallback = message.text.strip() or (message.header or "").strip() or "incident-bot"
    return {"text": clip(fallback, FALLBACK_TEXT), "blocks": to_blocks(message)}


def visible_message(message: ChatMessage) -> ChatMessage:
    """Every text a person reads through ``visible``; ids, values and URLs kept."""
    def section(s: Section) -> Section:
        return replace(s, text=visible(s.text), fields=tuple(visible(f) for f in s.fields),
                       code=visible(s.code) if s.code is not None else None,
                       buttons=tuple(button(b) for b in s.buttons))

    def button(b: Button) -> Button:
        return replace(b, label=visible(b.label),
                       confirm=visible(b.confirm) if b.confirm is not None else None)

    return replace(message, text=visible(message.text),
                   header=visible(message.header) if message.header is not None else None,
                   sections=tuple(section(s) for s in message.sections),
                   buttons=tuple(button(b) for b in message.buttons),
                   context=tuple(visible(c) for c in message.context))


def to_blocks(message: ChatMessage) -> list[Block]:
    head = [_header(message.header)] if message.header and message.header.strip() else []
    body: list[tuple[Block, int]] = []  # (block, priority): buttons 2, section text 1, code 0
    for i, section in enumerate(message.sections):
        body.extend((b, 0 if b.get("_code") else 1) for b in section_blocks(section))
        body.extend((b, 2) for b in actions_blocks(section.buttons, f"s{i}"))
    body.extend((b, 2) for b in actions_blocks(message.buttons, "m"))
    for block, _ in body:
        block.pop("_code", None)
    tail = [_context(message.context)] if any(c.strip() for c in message.context) else []
    return head + _fit(body, MAX_BLOCKS - len(head) - len(tail)) + tail


def _fit(body: list[tuple[Block, int]], budget: int) -> list[Block]:
    """Keep everything if it fits; else keep buttons, then texts, then code, and say so."""
    if len(body) <= budget:
        return [b for b, _ in body]
    room = budget - 1  # one block for the "omitted" note
    keep: set[int] = set()
    for priority in (2, 1, 0):
        for i, (_, p) in enumerate(body):
            if p == priority and len(keep) < room:
                keep.add(i)
    kept = [b for i, (b, _) in enumerate(body) if i in keep]
    note = strings.CHAT_TRUNCATED.format(blocks=fmt.counted(len(body) - len(kept), "block"))
    return [*kept, _context((note,))]


def _header(text: str) -> Block:
    flat = " ".join(text.split())
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": clip(flat, HEADER_TEXT), "emoji": True},
    }


def section_blocks(section: Section) -> list[Block]:
    blocks: list[Block] = []
    fields = [f for f in section.fields if f.strip()][:MAX_FIELDS]
    if section.text.strip() or fields:
        block: Block = {"type": "section"}
        if section.text.strip():
            block["text"] = _mrkdwn(clip(section.text, SECTION_TEXT))
        if fields:
            block["fields"] = [_mrkdwn(clip(f, FIELD_TEXT)) for f in fields]
        if section.accessory is not None:
            block["accessory"] = _button(section.accessory)
        blocks.append(block)
    if section.code is not None and section.code.strip():
        blocks.append({"type": "section", "text": _mrkdwn(code_text(section.code)), "_code": True})
    return blocks


def code_text(code: str) -> str:
    """A fenced block whose closing fence survives truncation."""
    inner = clip(code.strip("\n"), SECTION_TEXT - 2 * len(FENCE) - 2, marker="\n…")
    return f"{FENCE}\n{inner}\n{FENCE}"


def actions_blocks(buttons: Iterable[Button], prefix: str) -> list[Block]:
    elements = [_button(b) for b in buttons]
    blocks: list[Block] = []
    for n, start in enumerate(range(0, len(elements), MAX_ELEMENTS)):
        chunk = elements[start : start + MAX_ELEMENTS]
        _unique_action_ids(chunk)
        blocks.append({"type": "actions", "block_id": f"{prefix}:{n}", "elements": chunk})
    return blocks


def _unique_action_ids(elements: list[Block]) -> None:
    """Slack requires distinct action_ids within a block; repeats get a ``:n`` suffix."""
    seen: set[str] = set()
    for i, el in enumerate(elements):
        if el["action_id"] in seen:
            el["action_id"] = clip(el["action_id"], ACTION_ID - 4, marker="") + f":{i}"
        seen.add(el["action_id"])


def _button(button: Button) -> Block:
    label = " ".join(button.label.split()) or button.action_id or "?"
    el: Block = {
        "type": "button",
        "text": {"type": "plain_text", "text": clip(label, BUTTON_TEXT), "emoji": True},
        "action_id": clip(button.action_id or "button", ACTION_ID, marker=""),
        "value": button.value[:BUTTON_VALUE],
    }
    if button.style is not ButtonStyle.DEFAULT:
        el["style"] = button.style.value
    if button.confirm:
        el["confirm"] = _confirm(button.confirm)
    if button.url:
        el["url"] = button.url
    return el


def _confirm(text: str, title: str = "Are you sure?") -> Block:
    return {
        "title": _plain(clip(title, CONFIRM_TITLE)),
        "text": _plain(clip(text, CONFIRM_TEXT)),
        "confirm": _plain(clip(strings.CONFIRM_YES, CONFIRM_BUTTON)),
        "deny": _plain(clip(strings.CONFIRM_NO, CONFIRM_BUTTON)),
        "style": "danger",
    }


def _context(lines: Iterable[str]) -> Block:
    items = [line for line in lines if line.strip()]
    if len(items) > CONTEXT_ELEMENTS:
        items = [*items[: CONTEXT_ELEMENTS - 1], " · ".join(items[CONTEXT_ELEMENTS - 1 :])]
    return {"type": "context", "elements": [_mrkdwn(clip(t, SECTION_TEXT)) for t in items]}


def _mrkdwn(text: str) -> Block:
    return {"type": "mrkdwn", "text": text}


def _plain(text: str) -> Block:
    return {"type": "plain_text", "text": text or "?", "emoji": True}


def deny_modal(approval_id: str, channel: str, ts: str, kind: str) -> dict[str, Any]:
    """The views.open payload asking for a deny reason; metadata says what to deny."""
    meta = json.dumps({"approval_id": approval_id, "channel": channel, "ts": ts})
    return {
        "type": "modal",
        "callback_id": DENY_CALLBACK,
        "private_metadata": meta[:3000],
        "title": _plain(clip(strings.DENY_MODAL_TITLE, MODAL_TITLE)),
        "submit": _plain(clip(strings.DENY_MODAL_SUBMIT, MODAL_TITLE)),
        "close": _plain(clip(strings.CONFIRM_NO, MODAL_TITLE)),
        "blocks": [
            {"type": "section", "text": _mrkdwn(clip(inline_code(kind), SECTION_TEXT))},
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "label": _plain(strings.DENY_MODAL_LABEL),
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_INPUT,
                    "multiline": True,
                    "min_length": 3,
                    "max_length": 1000,
                },
            },
        ],
    }
