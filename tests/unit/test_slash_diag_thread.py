"""``/ir diag``'s background diagnosis logs a failure with an error id instead of dying
with an unhandled thread exception."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from bot.chat.slack import ChatDeliveryError
from bot.flow import slash_handlers
from bot.flow.context import FlowContext


def test_a_failed_post_is_logged_with_an_id(monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    def fails(ctx: Any, incident_id: str, **_: Any) -> None:
        raise ChatDeliveryError("chat.postMessage", 4, "Connection refused")

    monkeypatch.setattr(slash_handlers, "on_incident_opened", fails)
    handlers = slash_handlers.FlowSlashHandlers(cast(FlowContext, object()))
    with caplog.at_level(logging.ERROR):
        handlers._post("INC-7")  # returns: nothing escapes the thread
    [record] = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert "/ir diag INC-7" in record.getMessage()
    assert isinstance(record.exc_info[1] if record.exc_info else None, ChatDeliveryError)
