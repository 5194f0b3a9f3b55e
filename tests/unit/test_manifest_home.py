"""The manifest turns on what the Slack app listens for: the Home tab and its event."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def manifest() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "deploy" / "slack-app-manifest.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_home_tab_and_its_event_are_enabled() -> None:
    m = manifest()
    assert m["features"]["app_home"]["home_tab_enabled"] is True
    events = m["settings"]["event_subscriptions"]
    assert events["request_url"].endswith("/slack/events")
    assert set(events["bot_events"]) >= {"app_home_opened"}


def test_usage_hint_names_every_slash_verb() -> None:
    (command,) = manifest()["features"]["slash_commands"]
    for verb in ("status", "diag", "evidence", "ack", "resolve", "snooze", "jobs", "silence",
                 "digest"):
        assert verb in command["usage_hint"], verb
