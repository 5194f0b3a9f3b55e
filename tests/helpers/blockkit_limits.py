"""Slack's Block Kit limits, written down from Slack's reference (not from our renderer's
constants, so a wrong constant there cannot hide here), and a checker that names every
limit a payload breaks.

Sources (docs.slack.dev, Block Kit reference, read for issue 37):
- a message holds at most 50 blocks; a Home tab view at most 100;
- header: plain_text, at most 150 characters;
- section: ``text`` 1-3000 characters; at most 10 ``fields`` of at most 2000; one
  ``accessory`` element; ``block_id`` at most 255;
- actions: 1-25 elements, their ``action_id``s unique in the block;
- context: 1-10 elements;
- button: text at most 75, ``value`` at most 2000, ``action_id`` at most 255, ``url`` at
  most 3000, ``style`` primary or danger; a confirm dialog's title 100, text 300, its two
  buttons 30 each;
- a message's blocks may carry about 13,200 characters of text in all before Slack
  answers ``msg_blocks_too_long`` (not in the reference; measured and reported in
  slackapi/bolt-js#2509): we hold payloads to 12,000.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MESSAGE_BLOCKS, HOME_BLOCKS = 50, 100
HEADER, SECTION, FIELD, FIELDS = 150, 3000, 2000, 10
ELEMENTS, CONTEXT_ELEMENTS, BLOCK_ID = 25, 10, 255
BUTTON_TEXT, BUTTON_VALUE, ACTION_ID, BUTTON_URL = 75, 2000, 255, 3000
CONFIRM_TITLE, CONFIRM_TEXT, CONFIRM_BUTTON = 100, 300, 30
MESSAGE_TEXT = 12_000


def problems(blocks: list[dict[str, Any]], surface: str = "message") -> list[str]:
    """Every limit ``blocks`` break on ``surface`` ("message" or "home"); empty: fits."""
    out: list[str] = []
    most = MESSAGE_BLOCKS if surface == "message" else HOME_BLOCKS
    if len(blocks) > most:
        out.append(f"{len(blocks)} blocks > {most}")
    for n, block in enumerate(blocks):
        out += [f"block {n} ({block.get('type')}): {p}" for p in _block(block)]
    total = sum(len(t) for t in texts(blocks))
    if surface == "message" and total > MESSAGE_TEXT:
        out.append(f"{total} characters of text > {MESSAGE_TEXT}")
    return out


def texts(node: Any) -> Iterator[str]:
    """Every ``text`` string in a payload (text objects and their nesting)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from texts(value)


def _block(block: dict[str, Any]) -> list[str]:
    kind = block.get("type")
    out = []
    if len(str(block.get("block_id", ""))) > BLOCK_ID:
        out.append("block_id too long")
    if kind == "header":
        text = block.get("text", {})
        if text.get("type") != "plain_text" or not 0 < len(text.get("text", "")) <= HEADER:
            out.append("header text must be plain_text of 1-150 characters")
    elif kind == "section":
        out += _section(block)
    elif kind == "actions":
        elements = block.get("elements", [])
        if not 0 < len(elements) <= ELEMENTS:
            out.append(f"{len(elements)} elements (1-{ELEMENTS})")
        ids = [e.get("action_id") for e in elements]
        if len(ids) != len(set(ids)):
            out.append("action_ids repeat within the block")
        for e in elements:
            out += _element(e)
    elif kind == "context":
        elements = block.get("elements", [])
        if not 0 < len(elements) <= CONTEXT_ELEMENTS:
            out.append(f"{len(elements)} context elements (1-{CONTEXT_ELEMENTS})")
        out += [f"context text of {len(e.get('text', ''))}" for e in elements
                if not 0 < len(e.get("text", "")) <= SECTION]
    elif kind != "divider":
        out.append(f"unexpected block type {kind}")
    return out


def _section(block: dict[str, Any]) -> list[str]:
    out = []
    if "text" not in block and "fields" not in block:
        out.append("a section needs text or fields")
    if "text" in block and not 0 < len(block["text"].get("text", "")) <= SECTION:
        out.append(f"section text of {len(block['text'].get('text', ''))}")
    fields = block.get("fields", [])
    if len(fields) > FIELDS:
        out.append(f"{len(fields)} fields > {FIELDS}")
    out += [f"field of {len(f.get('text', ''))}" for f in fields
            if not 0 < len(f.get("text", "")) <= FIELD]
    if "accessory" in block:
        out += _element(block["accessory"])
    return out


def _element(e: dict[str, Any]) -> list[str]:
    if e.get("type") != "button":
        return [f"unexpected element {e.get('type')}"]
    out = []
    if not 0 < len(e.get("text", {}).get("text", "")) <= BUTTON_TEXT:
        out.append("button text length")
    if len(e.get("value", "")) > BUTTON_VALUE:
        out.append("button value length")
    if not 0 < len(e.get("action_id", "")) <= ACTION_ID:
        out.append("action_id length")
    if len(e.get("url", "")) > BUTTON_URL:
        out.append("button url length")
    if e.get("style") not in (None, "primary", "danger"):
        out.append(f"button style {e.get('style')}")
    confirm = e.get("confirm")
    if confirm is not None:
        if len(confirm["title"]["text"]) > CONFIRM_TITLE:
            out.append("confirm title length")
        if len(confirm["text"]["text"]) > CONFIRM_TEXT:
            out.append("confirm text length")
        if any(len(confirm[k]["text"]) > CONFIRM_BUTTON for k in ("confirm", "deny")):
            out.append("confirm button length")
    return out
