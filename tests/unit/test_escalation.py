"""Escalation decision and target, exhaustively over the inputs that matter."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.domain.lifecycle import IncidentState
from bot.schedule.escalation import (
    WAITING_STATES,
    EscalationCandidate,
    EscalationSettings,
    Target,
    due,
    escalation_message,
    resolve_target,
)

NOW = 10_000.0
AFTER = 900.0


def cand(**kw: object) -> EscalationCandidate:
    base: dict[str, object] = dict(
        id="12",
        host="gpu-01",
        kind="vram_idle",
        severity="critical",
        state="awaiting_approval",
        opened_at=NOW - AFTER,
        acted=False,
    )
    base.update(kw)
    return EscalationCandidate(**base)  # type: ignore[arg-type]


def test_critical_unanswered_old_enough_is_due() -> None:
    assert due([cand()], NOW, AFTER) == [cand()]


@pytest.mark.parametrize(
    "kw",
    [
        {"severity": "warning"},
        {"severity": "info"},
        {"acted": True},
        {"opened_at": NOW - AFTER + 1},
    ],
)
def test_not_due(kw: dict[str, object]) -> None:
    assert due([cand(**kw)], NOW, AFTER) == []


@pytest.mark.parametrize("state", list(IncidentState))
def test_only_states_waiting_for_a_person_escalate(state: IncidentState) -> None:
    expected = state in WAITING_STATES
    assert bool(due([cand(state=state.value)], NOW, AFTER)) is expected


def test_target_second_channel_wins_and_usergroup_is_mentioned() -> None:
    cfg = EscalationSettings(usergroup="S0ONCALL")
    assert resolve_target(cfg, "C0ESC", "C0INC") == Target("C0ESC", "<!subteam^S0ONCALL> ")
    own = EscalationSettings(channel="C0OWN")
    assert resolve_target(own, "C0ESC", "C0INC") == Target("C0OWN", "")


def test_target_usergroup_only_replies_in_incident_thread() -> None:
    t = resolve_target(EscalationSettings(usergroup="S0ONCALL"), "", "C0INC")
    assert t == Target("C0INC", "<!subteam^S0ONCALL> ", in_thread=True)


def test_target_off_when_disabled_or_nowhere_to_go() -> None:
    assert resolve_target(EscalationSettings(enabled=False), "C0ESC", "C0INC") is None
    assert resolve_target(EscalationSettings(), "", "C0INC") is None


def test_usergroup_must_be_an_id() -> None:
    with pytest.raises(ValidationError, match="usergroup"):
        EscalationSettings(usergroup="@oncall")
    with pytest.raises(ValidationError):
        EscalationSettings(after_minutes=0)


def test_message_mentions_and_escapes() -> None:
    msg = escalation_message(cand(host="<!channel>"), NOW, "<!subteam^S0ONCALL> ", "C0INC/1.2")
    assert msg.text.startswith("<!subteam^S0ONCALL> :rotating_light: Critical incident 12")
    assert "15m" in msg.text and "&lt;!channel&gt;" in msg.text and "<!channel>" not in msg.text
    assert msg.sections[0].text == msg.text  # the mention sits in a block, so it pings
    assert msg.context == ("Original message: C0INC/1.2",)
    assert msg.incident_id == "12"
