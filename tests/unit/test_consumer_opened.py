"""The consumer diagnoses an ``incident.opened`` only while the incident is still ``open``:
``/ir diag`` diagnoses its own incident, and the event reaching a busy consumer later must
not diagnose it a second time (a second set of approvals, a second policy decision)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from bot.domain.lifecycle import IncidentState
from bot.flow.consumer import Consumer


def consumer(state: IncidentState | None) -> tuple[Consumer, list[str]]:
    calls: list[str] = []
    found = SimpleNamespace(state=state) if state is not None else None
    publisher = SimpleNamespace(incidents=SimpleNamespace(get=lambda _id: found))
    diagnose = SimpleNamespace(on_opened=lambda i: calls.append(f"diagnose {i}"))
    policies = SimpleNamespace(after_diagnosis=lambda i: calls.append(f"policies {i}"))
    nothing: Any = object()
    return Consumer(nothing, cast(Any, diagnose), cast(Any, publisher), None,
                    cast(Any, policies)), calls


def test_an_open_incident_is_diagnosed_and_its_policies_run() -> None:
    c, calls = consumer(IncidentState.OPEN)
    c.handle({"type": "incident.opened", "incident_id": "INC-1"})
    assert calls == ["diagnose INC-1", "policies INC-1"]


@pytest.mark.parametrize("state", [None, IncidentState.DIAGNOSING,
                                   IncidentState.AWAITING_APPROVAL, IncidentState.REMEDIATING,
                                   IncidentState.RESOLVED])
def test_an_incident_past_open_is_left_alone(state: IncidentState | None) -> None:
    c, calls = consumer(state)
    c.handle({"type": "incident.opened", "incident_id": "INC-1"})
    assert calls == []
