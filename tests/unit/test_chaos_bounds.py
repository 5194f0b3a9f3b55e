"""The chaos run's clocks (issue 39): the driver's bounds and the checker's invariant 2
count from the heal of the last fault that could hold an incident up, not from the wall
clock, so Slack's channel budget under back-to-back faults is not read as a stuck bot; a
fault on another host is not in the way; a ceiling still ends every arming."""

from __future__ import annotations

from typing import Any, cast

from tests.helpers.chaos.checker import History, _last_heal_before, _owed_delivered
from tests.helpers.chaos.driver import ARMING_CEILING_S, ARMING_TIMEOUT_S, OWED_S, overdue
from tests.helpers.chaos.faults import Fault, quiet_since
from tests.helpers.chaos.run import Drain


def _fault(kind: str, target: str, started: float, healed: float = 0.0) -> Fault:
    return Fault(kind, target, healed - started if healed else 5.0, started=started,
                 healed=healed, started_wall=started, healed_wall=healed)


def test_quiet_since_is_the_last_heal_in_the_hosts_way() -> None:
    faults = [_fault("redis_kill", "redis", 10.0, 15.0),
              _fault("sshd_kill", "gpu-01", 20.0, 28.0),
              _fault("host_freeze", "gpu-02", 30.0, 39.0),
              Fault("slack_500", "slack", 4.0)]  # planned, not begun: not counted
    assert quiet_since(faults, "gpu-01") == 28.0
    assert quiet_since(faults, "gpu-02") == 39.0
    assert quiet_since(faults, "gpu-03") == 15.0  # neither host fault is in its way
    assert quiet_since([], "gpu-01") == 0.0


def test_an_active_fault_in_the_way_stops_the_clock_and_another_hosts_does_not() -> None:
    faults = [_fault("redis_kill", "redis", 10.0, 15.0), _fault("net_delay", "gpu-02", 20.0)]
    assert quiet_since(faults, "gpu-02") is None
    assert quiet_since(faults, "gpu-01") == 15.0
    faults.append(_fault("replica_stop", "serve1", 25.0))
    assert quiet_since(faults, "gpu-01") is None


def test_what_the_bot_owes_counts_from_the_last_heal_after_the_on_call_was_done() -> None:
    owed = 100.0
    faults = [_fault("slack_429", "slack", 110.0, 140.0)]
    # 70 s after the resolve, but 30 s after Slack answered again: not late yet
    assert overdue(faults, "gpu-01", "resolved", 50.0, owed, owed + OWED_S + 10) == ""
    late = overdue(faults, "gpu-01", "resolved", 50.0, owed, 140.0 + OWED_S + 1)
    assert late.startswith(f"the bot owed it for {OWED_S + 41:.0f}s") and "(last resolved)" in late
    # another host's fault does not move the clock: the resolve's own bound holds
    other = [_fault("host_freeze", "gpu-02", 110.0, 140.0)]
    assert overdue(other, "gpu-01", "resolved", 50.0, owed, owed + OWED_S + 1)
    # while a fault in the way is active, nothing is late
    active = [_fault("redis_stop", "redis", 110.0)]
    assert overdue(active, "gpu-01", "resolved", 50.0, owed, owed + OWED_S + 100) == ""


def test_the_arming_deadline_restarts_after_a_fault_and_the_ceiling_does_not() -> None:
    armed = 0.0
    faults = [_fault("redis_kill", "redis", 200.0, 209.0)]
    assert overdue(faults, "gpu-01", "diagnosing", armed, 0.0, ARMING_TIMEOUT_S + 5) == ""
    assert "not closed within 240s" in overdue(faults, "gpu-01", "diagnosing", armed, 0.0,
                                               209.0 + ARMING_TIMEOUT_S + 1)
    active = [_fault("redis_stop", "redis", 10.0)]
    assert "ceiling" in overdue(active, "gpu-01", "", armed, 0.0, ARMING_CEILING_S + 1)
    assert overdue(active, "gpu-01", "", armed, 0.0, ARMING_CEILING_S - 1) == ""


def test_the_checker_counts_the_same_faults_as_the_driver() -> None:
    faults = [_fault("redis_kill", "redis", 10.0, 15.0), _fault("sshd_kill", "gpu-02", 20.0, 28.0)]
    assert _last_heal_before(faults, 30.0, "gpu-01") == 15.0
    assert _last_heal_before(faults, 30.0, "gpu-02") == 28.0
    assert _last_heal_before(faults, 12.0, "gpu-02") == 15.0  # begun by then, healed later


def test_chat_still_queued_after_the_final_wait_is_owed_and_named() -> None:
    none = cast(Any, None)
    history = History(none, none, [], none, owed={
        "INC-66": ["postmortem", "reply:3fa2", "reply:77b0"], "INC-70": ["incident-card"]})
    lines = [v.line() for v in _owed_delivered(history)]
    assert lines == ["[owed] INC-66: 3 chat items still queued after the final wait "
                     "(postmortem, reply × 2)",
                     "[owed] INC-70: 1 chat item still queued after the final wait "
                     "(incident-card)"]
    assert list(_owed_delivered(History(none, none, [], none))) == []


def test_the_summary_says_how_long_the_chat_took_to_drain() -> None:
    assert Drain(12, 9.6, 41.2).line() == (
        "chat drained in 41 s after the last fault (12 items queued when the drivers were "
        "done, 10 s wait)")
    assert Drain(30, 96.0).line().startswith("chat NOT drained")
