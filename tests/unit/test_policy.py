"""Fleet policy, pure: first match wins, and auto falls back to approve with its reason."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.domain.approval import ApprovalPolicy
from bot.domain.policy import (
    ActionRef,
    Admission,
    BlastLimit,
    BreakerState,
    FleetLimits,
    Policy,
    PolicyMatch,
    PolicyMode,
    approval_policy_for,
    approvers_for,
    decide,
    first_match,
    limit_text,
    period_words,
    required_for,
)
from bot.domain.windows import parse_window

STOP = ActionRef("systemd.stop_disable", {"unit": "vllm-kimi.service"})
AUTO = Policy("stop-inference", PolicyMatch(action="systemd.stop_disable", unit="vllm-*",
                                            hosts="gpu-*", kinds=("vm_restart", "vram_idle")),
              PolicyMode.AUTO, BlastLimit(3, 3600), ("S0GPUOPS",),
              not_during=parse_window("Mon-Fri 09:00-18:00 Europe/Berlin"))
SHADOW = Policy("shadow-all-stops", PolicyMatch(action="systemd.*"), PolicyMode.SHADOW)
CATCH = Policy("everything", PolicyMatch())
SATURDAY = datetime(2026, 7, 18, 12, 0, tzinfo=UTC).timestamp()
WEDNESDAY_OFFICE = datetime(2026, 7, 15, 10, 0, tzinfo=UTC).timestamp()
CLOSED = BreakerState()


@pytest.mark.parametrize(("action", "host", "kind", "expected"), [
    (STOP, "gpu-01", "vm_restart", "stop-inference"),
    (STOP, "gpu-01", "vram_idle", "stop-inference"),
    (STOP, "gpu-01", "disk_full", "shadow-all-stops"),  # incident kind not listed
    (STOP, "cpu-01", "vm_restart", "shadow-all-stops"),  # host glob
    (ActionRef("systemd.stop_disable", {"unit": "sshd.service"}), "gpu-01", "vm_restart",
     "shadow-all-stops"),  # unit glob
    (ActionRef("systemd.stop_disable"), "gpu-01", "vm_restart", "shadow-all-stops"),  # no unit
    (ActionRef("host.reboot"), "gpu-01", "vm_restart", "everything"),
])
def test_first_match_wins_in_order(action: ActionRef, host: str, kind: str,
                                   expected: str) -> None:
    found = first_match([AUTO, SHADOW, CATCH], action, host, kind)
    assert found is not None and found.name == expected


def test_no_policy_no_match_means_approve() -> None:
    assert first_match([AUTO], ActionRef("host.reboot"), "gpu-01", "vm_restart") is None
    d = decide(None, SATURDAY, None, CLOSED)
    assert d.mode is PolicyMode.APPROVE and d.policy is None and "no policy" in d.reason


def test_params_globs_are_anded_with_unit() -> None:
    m = PolicyMatch(params={"pid": "1*"}, unit="a*")
    assert m.matches(ActionRef("k", {"pid": "12", "unit": "ab"}), "h", "x")
    assert not m.matches(ActionRef("k", {"pid": "22", "unit": "ab"}), "h", "x")
    assert not m.matches(ActionRef("k", {"pid": "12"}), "h", "x")


def test_auto_runs_when_counted_and_admitted() -> None:
    d = decide(AUTO, SATURDAY, Admission(True, ("gpu-01",)), CLOSED)
    assert d.mode is PolicyMode.AUTO and d.policy_name == "stop-inference"
    assert "stop-inference" in d.reason and not d.fell_back


def test_limit_reached_falls_back_with_the_hosts_named() -> None:
    d = decide(AUTO, SATURDAY, Admission(False, ("gpu-11", "gpu-03", "gpu-07")), CLOSED)
    assert d.mode is PolicyMode.APPROVE and d.fell_back
    assert d.reason == "limit reached: 3 hosts in the last hour (gpu-03, gpu-07, gpu-11)"


def test_office_hours_window_falls_back_before_counting() -> None:
    d = decide(AUTO, WEDNESDAY_OFFICE, Admission(True, ("gpu-01",)), CLOSED)
    assert d.mode is PolicyMode.APPROVE
    assert "Mon-Fri 09:00-18:00 Europe/Berlin" in d.reason


def test_open_breaker_stops_auto_but_not_shadow() -> None:
    breaker = BreakerState(True, ("a", "b"), 2)
    d = decide(AUTO, SATURDAY, None, breaker)
    assert d.mode is PolicyMode.APPROVE and "circuit breaker" in d.reason
    assert decide(SHADOW, SATURDAY, None, breaker, "systemd.mask").mode is PolicyMode.SHADOW


def test_breaker_answer_from_the_count() -> None:
    d = decide(AUTO, SATURDAY, Admission(False, ("gpu-01",), breaker=True, tripped=True,
                                         fleet_hosts=("a", "b"), cap=2), CLOSED)
    assert d.mode is PolicyMode.APPROVE
    assert d.reason.startswith("circuit breaker open: 2 hosts") and "cap 2" in d.reason


def test_shadow_says_what_it_would_have_run() -> None:
    d = decide(SHADOW, SATURDAY, None, CLOSED, "systemd.mask")
    assert d.mode is PolicyMode.SHADOW
    assert d.reason.startswith("would have run systemd.mask under policy shadow-all-stops")


def test_approve_policy_asks() -> None:
    d = decide(CATCH, SATURDAY, None, CLOSED)
    assert d.mode is PolicyMode.APPROVE and not d.fell_back and "everything" in d.reason


def test_approvers_and_two_person() -> None:
    default = frozenset({"UALICE"})
    assert approvers_for(AUTO, default) == {"S0GPUOPS"}
    assert approvers_for(CATCH, default) == default and approvers_for(None, default) == default
    assert required_for(Policy("p", two_person=True), 1) == 2
    assert required_for(CATCH, 2) == 2 and required_for(None, 1) == 1


@pytest.mark.parametrize(("n", "fraction", "cap"), [(288, 0.01, 2), (4, 0.5, 2), (1000, 0.5, 10),
                                                     (3, 0.1, 0)])
def test_fleet_cap_is_the_smaller(n: int, fraction: float, cap: int) -> None:
    assert FleetLimits(10, fraction).cap(n) == cap


def test_period_words() -> None:
    assert period_words(3600) == "hour" and period_words(86400) == "day"
    assert period_words(1800) == "30 min"
    p = Policy("p", limit=BlastLimit(2, 1800))
    assert limit_text(p, ["b", "a"]) == "limit reached: 2 hosts in the last 30 min (a, b)"


MODES = st.sampled_from(list(PolicyMode))
HOSTS = st.lists(st.from_regex(r"gpu-[0-9]{2}", fullmatch=True), max_size=6, unique=True)


@given(MODES, st.booleans(), st.booleans(), HOSTS, st.booleans(), st.booleans())
def test_decide_never_runs_auto_unless_every_gate_is_open(
        mode: PolicyMode, admitted: bool, breaker_open: bool, hosts: list[str],
        in_office: bool, counted_breaker: bool) -> None:
    """Whatever the inputs, AUTO comes out only from an auto policy, outside its window,
    with the breaker closed and the count admitted; and the mode never escalates."""
    policy = Policy("p", AUTO.match, mode, AUTO.limit, not_during=AUTO.not_during)
    now = WEDNESDAY_OFFICE if in_office else SATURDAY
    counted = Admission(admitted, tuple(hosts), breaker=counted_breaker and not admitted)
    d = decide(policy, now, counted, BreakerState(breaker_open))
    if d.mode is PolicyMode.AUTO:
        assert mode is PolicyMode.AUTO and admitted and not in_office and not breaker_open
    if mode is PolicyMode.APPROVE:
        assert d.mode is PolicyMode.APPROVE
    if mode is PolicyMode.SHADOW:
        assert d.mode in (PolicyMode.SHADOW, PolicyMode.APPROVE)
    assert d.policy is policy and d.reason


@given(st.lists(st.sampled_from(["gpu-*", "cpu-*", "*", "gpu-0?"]), max_size=5),
       st.from_regex(r"(gpu|cpu)-[0-9]{2}", fullmatch=True))
def test_first_match_is_the_first_whose_glob_matches(globs: list[str], host: str) -> None:
    policies = [Policy(f"p{i}", PolicyMatch(hosts=g)) for i, g in enumerate(globs)]
    found = first_match(policies, STOP, host, "vm_restart")
    matching = [p for p in policies if p.match.matches(STOP, host, "vm_restart")]
    assert found is (matching[0] if matching else None)


def test_approval_policy_for_replaces_only_that_kind() -> None:
    base = ApprovalPolicy(approvers=frozenset({"UALICE"}), two_person=frozenset({"host.reboot"}))
    assert approval_policy_for(base, None, "systemd.mask") is base
    assert approval_policy_for(base, CATCH, "systemd.mask") is base
    rules = approval_policy_for(base, Policy("p", approvers=("S0X",), two_person=True), "k")
    assert rules.approvers_for("k") == {"S0X"} and rules.approvers_for("j") == {"UALICE"}
    assert rules.required_for("k") == 2 and rules.required_for("host.reboot") == 2
    assert rules.required_for("j") == 1
