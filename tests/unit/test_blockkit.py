"""Block Kit output always fits Slack's limits, and buttons survive truncation."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.chat import blockkit as bk
from bot.chat.base import Button, ButtonStyle, ChatMessage, Section


def walk(blocks: list[dict[str, Any]]) -> None:
    """Assert every documented limit on the blocks we emit."""
    assert len(blocks) <= bk.MAX_BLOCKS
    for block in blocks:
        kind = block["type"]
        if kind == "header":
            assert 0 < len(block["text"]["text"]) <= bk.HEADER_TEXT
            assert block["text"]["type"] == "plain_text"
        elif kind == "section":
            assert "text" in block or "fields" in block
            if "text" in block:
                assert 0 < len(block["text"]["text"]) <= bk.SECTION_TEXT
                assert block["text"]["text"].strip()
            assert len(block.get("fields", [])) <= bk.MAX_FIELDS
            assert all(0 < len(f["text"]) <= bk.FIELD_TEXT for f in block.get("fields", []))
        elif kind == "actions":
            elements = block["elements"]
            assert 0 < len(elements) <= bk.MAX_ELEMENTS
            assert len(block["block_id"]) <= 255
            ids = [e["action_id"] for e in elements]
            assert len(ids) == len(set(ids)), "action_ids must be unique within a block"
            for e in elements:
                assert 0 < len(e["text"]["text"]) <= bk.BUTTON_TEXT
                assert len(e["value"]) <= bk.BUTTON_VALUE
                assert 0 < len(e["action_id"]) <= bk.ACTION_ID
                assert e.get("style") in (None, "primary", "danger")
                if "confirm" in e:
                    c = e["confirm"]
                    assert len(c["title"]["text"]) <= bk.CONFIRM_TITLE
                    assert len(c["text"]["text"]) <= bk.CONFIRM_TEXT
                    assert len(c["confirm"]["text"]) <= bk.CONFIRM_BUTTON
        elif kind == "context":
            assert 0 < len(block["elements"]) <= bk.CONTEXT_ELEMENTS
            assert all(0 < len(e["text"]) <= bk.SECTION_TEXT for e in block["elements"])
        else:
            raise AssertionError(f"unexpected block type {kind}")


texts = st.text(min_size=0, max_size=6000)
buttons = st.builds(
    Button,
    label=st.text(max_size=200),
    action_id=st.sampled_from(["approve", "deny", "revert", "x" * 300]),
    value=st.text(max_size=2500),
    style=st.sampled_from(list(ButtonStyle)),
    confirm=st.none() | st.text(max_size=600),
)
sections = st.builds(
    Section,
    text=texts,
    fields=st.lists(st.text(max_size=2500), max_size=14).map(tuple),
    code=st.none() | texts,
    buttons=st.lists(buttons, max_size=30).map(tuple),
)
messages = st.builds(
    ChatMessage,
    text=texts,
    header=st.none() | st.text(max_size=400),
    sections=st.lists(sections, max_size=40).map(tuple),
    buttons=st.lists(buttons, max_size=30).map(tuple),
    context=st.lists(st.text(max_size=3500), max_size=14).map(tuple),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(messages)
def test_any_message_fits_slack_limits(message: ChatMessage) -> None:
    payload = bk.to_payload(message)
    walk(payload["blocks"])
    assert 0 < len(payload["text"]) <= bk.FALLBACK_TEXT
    json.dumps(payload)  # serialisable as sent


def _many(n: int, with_buttons: bool) -> ChatMessage:
    secs = tuple(
        Section(
            text=f"finding {i}",
            code="x" * 10,
            buttons=(Button("Approve", "approve", f"a{i}"), Button("Deny", "deny", f"a{i}"))
            if with_buttons
            else (),
        )
        for i in range(n)
    )
    return ChatMessage(text="t", header="h", sections=secs, context=("state",))


def test_truncation_keeps_buttons_before_content_and_says_so() -> None:
    blocks = bk.to_blocks(_many(20, with_buttons=True))  # 60 body blocks
    walk(blocks)
    assert len(blocks) == bk.MAX_BLOCKS
    values = {e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]}
    assert values == {f"a{i}" for i in range(20)}, "every approval keeps its buttons"
    notes = [
        b for b in blocks if b["type"] == "context" and "not shown" in b["elements"][0]["text"]
    ]
    assert len(notes) == 1 and "13 blocks not shown" in notes[0]["elements"][0]["text"]
    texts = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert [t for t in texts if t.startswith("finding")] == [f"finding {i}" for i in range(20)]
    assert sum(t.startswith("```") for t in texts) == 7  # code goes first when space runs out
    assert blocks[0]["type"] == "header" and blocks[-1]["elements"][0]["text"] == "state"


def test_fits_without_note_when_under_limit() -> None:
    blocks = bk.to_blocks(_many(10, with_buttons=True))
    assert len(blocks) == 1 + 30 + 1
    assert not any("not shown" in json.dumps(b) for b in blocks)


def test_long_texts_are_clipped_with_a_marker() -> None:
    msg = ChatMessage(
        text="x" * 5000,
        header="H" * 500,
        sections=(Section(text="s" * 4000, code="c\n" * 3000),),
        buttons=(Button("L" * 100, "approve", "v" * 2100, ButtonStyle.PRIMARY, "sure? " * 100),),
    )
    payload = bk.to_payload(msg)
    blocks = payload["blocks"]
    walk(blocks)
    assert blocks[0]["text"]["text"].endswith("…") and len(blocks[0]["text"]["text"]) == 150
    assert blocks[1]["text"]["text"].endswith("…") and len(blocks[1]["text"]["text"]) == 3000
    code = blocks[2]["text"]["text"]
    assert code.startswith("```\n") and code.endswith("\n```") and "…" in code and len(code) <= 3000
    button = blocks[3]["elements"][0]
    assert len(button["text"]["text"]) == 75 and len(button["value"]) == 2000
    assert button["style"] == "primary" and button["confirm"]["text"]["text"].endswith("…")
    assert len(payload["text"]) == 4000


def test_duplicate_action_ids_in_one_block_get_suffixes() -> None:
    msg = ChatMessage(text="t", buttons=(Button("A", "approve", "1"), Button("A", "approve", "2")))
    (block,) = bk.to_blocks(msg)
    assert [e["action_id"] for e in block["elements"]] == ["approve", "approve:1"]


def test_empty_parts_are_skipped() -> None:
    msg = ChatMessage(
        text="", header="  ", sections=(Section(text="  ", code="\n"),), context=(" ",)
    )
    payload = bk.to_payload(msg)
    assert payload["blocks"] == [] and payload["text"] == "incident-bot"


def test_deny_modal_shape() -> None:
    view = bk.deny_modal("abc", "C1", "1.2", "systemd.stop_disable")
    assert view["callback_id"] == bk.DENY_CALLBACK and len(view["title"]["text"]) <= 24
    assert json.loads(view["private_metadata"]) == {
        "approval_id": "abc",
        "channel": "C1",
        "ts": "1.2",
    }
    reason = view["blocks"][1]
    assert (
        reason["block_id"] == bk.REASON_BLOCK and reason["element"]["action_id"] == bk.REASON_INPUT
    )
