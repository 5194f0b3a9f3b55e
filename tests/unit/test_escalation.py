"""Escalation decision and target, exhaustively over the inputs that matter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
    person_on_it,
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


# the decision table, written out: states where nobody can go on without a person page
PAGES = {"open", "diagnosing", "diagnosis_failed", "no_action", "awaiting_approval", "expired",
         "action_failed"}
QUIET = {"approved", "denied", "remediating", "verified", "resumed", "snoozed", "resolved"}


def test_the_table_covers_every_state_once() -> None:
    assert {s.value for s in IncidentState} == PAGES | QUIET and not PAGES & QUIET
    assert {s.value for s in WAITING_STATES} == PAGES


@pytest.mark.parametrize("state", list(IncidentState))
def test_only_states_waiting_for_a_person_escalate(state: IncidentState) -> None:
    assert bool(due([cand(state=state.value)], NOW, AFTER)) is (state.value in PAGES)


@dataclass
class Entry:
    action: str
    ts: float
    detail: dict[str, Any] = field(default_factory=dict)


def entered(state: str, ts: float) -> Entry:
    return Entry("transition", ts, {"to": state})


@pytest.mark.parametrize(("entries", "state", "on_it"), [
    ([], "awaiting_approval", False),
    ([entered("awaiting_approval", 10), Entry("approval.first_approver", 20)],
     "awaiting_approval", True),
    # the approval came before the fix failed: nobody is looking at the failure
    ([entered("awaiting_approval", 10), Entry("approval.approved", 20),
      entered("action_failed", 30)], "action_failed", False),
    ([entered("action_failed", 30), Entry("incident.retry", 40)], "action_failed", True),
    # an acknowledgement is ownership: it holds across later states
    ([Entry("incident.ack", 5), entered("action_failed", 30)], "action_failed", True),
    # an unauthorised click is not somebody taking care of it
    ([entered("expired", 10), Entry("approval.refused", 20)], "expired", False),
])
def test_person_on_it(entries: list[Entry], state: str, on_it: bool) -> None:
    assert person_on_it(entries, state) is on_it


def test_target_second_channel_wins_and_usergroup_is_mentioned() -> None:
    cfg = EscalationSettings(usergroup="S0ONCALL")
    assert resolve_target(cfg, "C0ESC", "C0INC") == Target("C0ESC", "<!subteam^S0ONCALL> ")
    own = EscalationSettings(channel="C0OWN")
    assert resolve_target(own, "C0ESC", "C0INC") == Target("C0OWN", "")


def test_target_usergroup_only_replies_in_incident_thread() -> None:
    t = resolve_target(EscalationSettings(usergroup="S0ONCALL"), "", "C0INC")
    assert t == Target("C0INC", "<!subteam^S0ONCALL> ", in_thread=True)


def test_escalation_mentions_the_next_group_else_oncall() -> None:
    nxt = EscalationSettings(usergroup="S0NEXT")
    assert resolve_target(nxt, "C0ESC", "C0INC", oncall="S0ONCALL").mention == "<!subteam^S0NEXT> "
    fallback = resolve_target(EscalationSettings(), "C0ESC", "C0INC", oncall="S0ONCALL")
    assert fallback == Target("C0ESC", "<!subteam^S0ONCALL> ")
    in_thread = resolve_target(EscalationSettings(), "", "C0INC", oncall="S0ONCALL")
    assert in_thread == Target("C0INC", "<!subteam^S0ONCALL> ", in_thread=True)
    assert resolve_target(EscalationSettings(), "C0ESC", "C0INC", oncall="@oncall") == \
        Target("C0ESC", ""), "only a usergroup id is mentioned"


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
    assert "15 min" in msg.text and "&lt;!channel&gt;" in msg.text and "<!channel>" not in msg.text
    assert msg.sections[0].text == msg.text  # the mention sits in a block, so it pings
    assert msg.context == ("Original message: C0INC/1.2",)
    assert msg.incident_id == "12"


def test_drained_max_s_defaults_to_a_day_and_must_be_positive() -> None:
    assert EscalationSettings().drained_max_s == 86400.0
    assert EscalationSettings(drained_max_s=3600).drained_max_s == 3600.0
    with pytest.raises(ValidationError):
        EscalationSettings(drained_max_s=0)


def test_only_the_bots_drains_of_closed_incidents_past_the_limit_are_overdue() -> None:
    from bot.domain.slurm import DrainedNode, overdue_drained

    ours = DrainedNode("gpu-01", "DRAINED", "root", "incident-bot INC-7: x", 1000.0, True, "INC-7")
    person = DrainedNode("gpu-02", "DRAINED", "alice", "fan", 1000.0)
    unknown = DrainedNode("gpu-03", "DRAINED", "root", "incident-bot INC-8: y", None, True, "INC-8")
    nodes = [ours, person, unknown]
    assert overdue_drained(nodes, 1000.0 + 7200, 3600, set()) == [ours]
    assert overdue_drained(nodes, 1000.0 + 7200, 3600, {"INC-7"}) == []
    assert overdue_drained(nodes, 1000.0 + 60, 3600, set()) == []

def test_can_escalate_only_where_escalation_has_somewhere_to_go() -> None:
    """Issue 29: the renderer's Escalate button follows ``can_escalate``."""
    from bot.config.settings import Settings
    from bot.schedule.escalation import can_escalate

    def settings(slack: dict[str, Any], extra: dict[str, Any] | None = None) -> Settings:
        return Settings.model_validate({"slack": slack, "extra": extra or {}})

    assert not can_escalate(settings({}), "C-INC")
    assert not can_escalate(settings({"oncall": "UONCALL"}), "C-INC")  # a user id: no mention
    assert can_escalate(settings({"oncall": "S0ONCALL"}), "C-INC")
    assert can_escalate(settings({"escalation_channel": "C-ESC"}), "C-INC")
    assert not can_escalate(settings({"escalation_channel": "C-ESC"},
                                     {"escalation": {"enabled": False}}), "C-INC")
    assert not can_escalate(settings({}, {"escalation": {"usergroup": "bad"}}), "C-INC")
