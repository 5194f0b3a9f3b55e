"""Hidden characters from alerts and hosts are spelled out in every message (issue 39):
U+202E reached Slack raw in the alert card, so a line could be visually spoofed."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from bot.chat import blockkit as bk
from bot.chat.alert_card import render_alert_card
from bot.chat.base import ChatMessage, MessageRef, Section
from bot.chat.terminal import TerminalBackend
from bot.chat.text import code_safe, to_plain
from bot.core.visible import visible, visible_payload
from bot.domain.incident import Alert, Incident
from bot.domain.lifecycle import IncidentState
from playbooks.text import printable

RLO, ESC, ZWSP = "\u202e", "\x1b", "\u200b"
HIDDEN = ("\u202a", "\u202b", "\u202c", "\u202d", RLO, "\u2066", "\u2067", "\u2068", "\u2069",
          "\u200e", "\u200f", "\u061c", "\x00", "\x07", ESC, "\x7f", "\x85", "\x9b", ZWSP,
          "\u200c", "\u200d", "\u2060", "\ufeff", "\u2028", "\u2029", "\U000e0041")


@pytest.mark.parametrize("char", HIDDEN)
def test_each_hidden_character_is_spelled_out(char: str) -> None:
    shown = visible(f"gpu-{char}01")
    assert char not in shown
    code = ord(char)
    spelled = f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    assert shown == f"gpu-{spelled}01"


def test_tab_newline_and_ordinary_text_stay() -> None:
    text = "gpu-01\tvLLM holds 8 × 75.8 GB · ✅ naïve 日本語\nnext line"
    assert visible(text) == text


@given(st.text(alphabet=st.characters(exclude_characters="\\")))
def test_nothing_hidden_survives_and_nothing_else_changes(text: str) -> None:
    shown = visible(text)
    assert not any(c in shown for c in HIDDEN)
    back = re.sub(r"\\u([0-9a-f]{4})|\\U([0-9a-f]{8})",
                  lambda m: chr(int(m.group(1) or m.group(2), 16)), shown)
    assert back == text  # spelled, never dropped or replaced


def test_payload_strings_spelled_keys_and_values_kept() -> None:
    payload = {"text": f"a{RLO}b", "blocks": [{"type": "section", "value": "INC-1|0",
                                                 "text": {"text": f"x{ESC}[31m"}}]}
    assert visible_payload(payload) == {
        "text": "a\\u202eb",
        "blocks": [{"type": "section", "value": "INC-1|0", "text": {"text": "x\\u001b[31m"}}]}


def test_every_slack_payload_carries_no_hidden_character() -> None:
    message = ChatMessage(text=f"gpu-01{RLO}10 held", header=f"h{ZWSP}",
                          sections=(Section(f"*bold*{ESC}[2J", code=f"ps{RLO}aux"),),
                          context=(f"c{ZWSP}",))
    raw = json.dumps(bk.to_payload(message), ensure_ascii=False)
    assert not any(c in raw for c in (RLO, ESC, ZWSP))
    assert "gpu-01\\\\u202e10" in raw  # the backslash itself, JSON-escaped


def test_the_alert_card_shows_an_alerts_bidi_override_spelled_out() -> None:
    """The alert's summary and labels as an attacker would write them: the card's text
    says exactly which characters are there."""
    alert = Alert(source="alertmanager", host="gpu-01", kind="vram_idle",
                  summary=f"GPU memory held {RLO}10-upg", labels={"team": f"ml{RLO}ops"})
    incident = replace(Incident.open_from("INC-7", alert, 1_700_000_000.0),
                       state=IncidentState.DIAGNOSING)
    card = render_alert_card(incident, now=1_700_000_000.0)
    raw = json.dumps(bk.to_payload(card), ensure_ascii=False)
    assert RLO not in raw
    assert "held \\\\u202e10-upg" in raw and "ml\\\\u202eops" in raw


def test_code_fences_break_visibly_now() -> None:
    """The fence inside host text used to be broken with zero-width spaces, which the
    edge would now spell out; thin spaces break it and stay readable."""
    assert "```" not in code_safe("a```b") and ZWSP not in code_safe("a```b")


def test_terminal_prints_hidden_characters_spelled_out() -> None:
    out = io.StringIO()
    backend = TerminalBackend(Console(file=out, width=200, color_system=None))
    backend.post("C1", ChatMessage(text=f"gpu-01{RLO}10", sections=(Section(f"x{ESC}[2Jy"),)))
    backend.update(MessageRef("C1", "1"), ChatMessage(text="t", sections=(Section(f"z{ZWSP}"),)))
    printed = out.getvalue()
    assert not any(c in printed for c in (RLO, ESC, ZWSP))
    assert "x\\u001b[2Jy" in printed and "z\\u200b" in printed
    assert to_plain(f"&lt;{RLO}&gt;") == "<\\u202e>"


def test_host_text_in_findings_is_spelled_not_hidden() -> None:
    assert printable(f"vllm{RLO}.service\nnext") == "vllm\\u202e.service?next"
