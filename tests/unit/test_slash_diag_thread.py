"""``/ir diag``'s background diagnosis logs a failure with an error id instead of dying
with an unhandled thread exception."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bot.chat.slack import ChatDeliveryError
from bot.flow.diagnose_step import DiagnoseStep
from bot.flow.slash_handlers import FlowSlashHandlers


class FailingDiagnosis:
    def on_opened(self, incident_id: str, **_: object) -> None:
        raise ChatDeliveryError("chat.postMessage", 4, "Connection refused")


def test_a_failed_post_is_logged_with_an_id(caplog: pytest.LogCaptureFixture) -> None:
    nothing: Any = object()
    no_slurm: Any = SimpleNamespace(drained=None)
    handlers = FlowSlashHandlers(nothing, (), cast(DiagnoseStep, FailingDiagnosis()), nothing,
                                 nothing, nothing, opens=nothing, slurm=no_slurm)
    with caplog.at_level(logging.ERROR):
        handlers._post("INC-7")  # returns: nothing escapes the thread
    [record] = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert "/ir diag INC-7" in record.getMessage()
    assert isinstance(record.exc_info[1] if record.exc_info else None, ChatDeliveryError)
