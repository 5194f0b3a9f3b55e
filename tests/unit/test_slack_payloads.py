"""Our click payloads carry every field of a real one (tests/fixtures/real/slack)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.slack_payloads import block_actions, find_button

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "slack" / "block_actions_button.json"
MESSAGE = {"type": "message", "ts": "1700000000.000100", "text": "gpu-01: vram_idle",
           "user": "UBOT", "bot_id": "BBOT",
           "blocks": [{"type": "actions", "block_id": "s2:0", "elements": [
               {"type": "button", "action_id": "approve", "value": "abc",
                "text": {"type": "plain_text", "text": "Approve", "emoji": True},
                "style": "primary"}]}]}


def test_payload_has_the_real_fields_and_the_exact_message() -> None:
    real = json.loads(REAL.read_text())
    block_id, button = find_button(MESSAGE, lambda el: el["value"] == "abc")
    ours = block_actions(MESSAGE, "C1", "UALICE", block_id, button, "http://127.0.0.1:9")
    assert set(real) <= set(ours)
    assert set(real["container"]) - {"thread_ts"} <= set(ours["container"])
    assert set(real["actions"][0]) <= set(ours["actions"][0])
    assert ours["message"] == MESSAGE and ours["message"] is not MESSAGE
    assert (ours["actions"][0]["block_id"], ours["actions"][0]["value"]) == ("s2:0", "abc")
    assert ours["container"]["message_ts"] == MESSAGE["ts"]
