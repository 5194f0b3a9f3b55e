"""The consumer's ``incident.opened`` is a first diagnosis only: a duplicate or late event
(``/ir diag`` already diagnosing its own incident, a re-drive racing a live step) is refused
by storage's claim on the step (``StepTaken``) and skipped, never diagnosed twice."""

from __future__ import annotations

from typing import Any

from bot.domain.lifecycle import FIRST_DIAGNOSIS, IncidentState, StepTaken
from bot.flow.consumer import Consumer


class Diagnosis:
    def __init__(self, taken: bool) -> None:
        self.taken = taken
        self.calls: list[tuple[str, frozenset[IncidentState] | None]] = []

    def on_opened(self, incident_id: str,
                  only_from: frozenset[IncidentState] | None = None) -> None:
        self.calls.append((incident_id, only_from))
        if self.taken:
            raise StepTaken(incident_id, IncidentState.DIAGNOSING, "another owner holds it")


def test_an_opened_event_asks_for_a_first_diagnosis() -> None:
    nothing: Any = object()
    diagnosis = Diagnosis(taken=False)
    Consumer(nothing, diagnosis, nothing).handle({"type": "incident.opened",
                                                  "incident_id": "INC-1"})
    assert diagnosis.calls == [("INC-1", FIRST_DIAGNOSIS)]


def test_a_step_someone_else_holds_is_skipped_quietly() -> None:
    nothing: Any = object()
    diagnosis = Diagnosis(taken=True)
    Consumer(nothing, diagnosis, nothing).handle({"type": "incident.opened",
                                                  "incident_id": "INC-1"})  # no exception
    assert diagnosis.calls == [("INC-1", FIRST_DIAGNOSIS)]
