"""What ``/readyz`` says of the background loops (issue 39): a loop failing, or silent, for
longer than its grace is stuck, with its last reason; one ``ok`` clears it."""

from __future__ import annotations

from bot.core.heartbeat import Heartbeats


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_failing_loop_is_stuck_after_its_grace_with_its_reason() -> None:
    clock = Clock()
    beats = Heartbeats(clock)
    beats.watch("consumer", 10)
    beats.failed("consumer", "Redis refused a step: oom")
    clock.now += 9
    assert beats.stuck() == []  # a blip is not a stuck loop
    beats.failed("consumer", "Redis refused a step: readonly")
    clock.now += 2
    (stuck,) = beats.stuck()
    assert stuck.name == "consumer" and stuck.reason == "Redis refused a step: readonly"
    assert stuck.line() == "consumer: no progress for 11s (Redis refused a step: readonly)"
    beats.ok("consumer")
    assert beats.stuck() == []


def test_a_silent_loop_is_stuck_and_each_loop_has_its_own_grace() -> None:
    clock = Clock()
    beats = Heartbeats(clock)
    beats.watch("outbox", 10)
    beats.watch("reconciler", 40)
    clock.now += 15
    (stuck,) = beats.stuck()
    assert stuck.name == "outbox" and "no iteration finished" in stuck.line()
    assert beats.ages() == {"outbox": 15.0, "reconciler": 15.0}
    beats.ok("somebody else")  # an unknown loop is ignored
    clock.now += 30
    assert [s.name for s in beats.stuck()] == ["outbox", "reconciler"]
