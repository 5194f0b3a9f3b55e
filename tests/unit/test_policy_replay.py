"""Replay and check, pure: the in-memory count mirrors the Redis script's rules."""

from __future__ import annotations

from bot.domain.policy import ActionRef, BlastLimit, FleetLimits, Policy, PolicyMatch, PolicyMode
from bot.domain.policy_replay import PastAction, check_rows, replay

STOP = ActionRef("systemd.stop_disable", {"unit": "vllm-a.service"})
AUTO = Policy("auto-stop", PolicyMatch(action="systemd.stop_disable", unit="vllm-*"),
              PolicyMode.AUTO, BlastLimit(2, 3600))


def past(ts: float, host: str, action: ActionRef = STOP) -> PastAction:
    return PastAction(ts, "INC-1", host, action, "vm_restart")


def test_the_window_slides_and_a_host_counts_once() -> None:
    items = [past(0, "a"), past(10, "b"), past(20, "a"), past(30, "c"), past(3700, "c")]
    modes = [d.mode for _, d in replay([AUTO], items, FleetLimits(10, 1.0), 10)]
    assert modes == [PolicyMode.AUTO, PolicyMode.AUTO, PolicyMode.AUTO, PolicyMode.APPROVE,
                     PolicyMode.AUTO]


def test_the_breaker_in_a_replay_stops_every_policy_for_its_window() -> None:
    other = Policy("other", PolicyMatch(action="host.reboot"), PolicyMode.AUTO)
    items = [past(0, "a"), past(1, "b", ActionRef("host.reboot")), past(2, "c"),
             past(3, "a"), past(4000, "d")]
    results = replay([AUTO, other], items, FleetLimits(2, 1.0), 10)
    modes = [d.mode for _, d in results]
    assert modes == [PolicyMode.AUTO, PolicyMode.AUTO, PolicyMode.APPROVE, PolicyMode.APPROVE,
                     PolicyMode.AUTO]
    assert results[2][1].reason.startswith("circuit breaker open: 2 hosts")


def test_check_rows_chain_until_an_unconditional_match() -> None:
    catch = Policy("catch", PolicyMatch(hosts="gpu-*"))
    rows = check_rows([AUTO, catch], ["gpu-01", "cpu-01"], ["systemd.stop_disable"])
    assert [(r.host, r.policy.name if r.policy else None, r.conditions) for r in rows] == [
        ("gpu-01", "auto-stop", ("unit vllm-*",)), ("gpu-01", "catch", ()),
        ("cpu-01", "auto-stop", ("unit vllm-*",)), ("cpu-01", None, ())]
    settled = check_rows([AUTO, catch], ["gpu-01"], ["systemd.stop_disable"],
                         {"unit": "vllm-b.service"})
    assert [(r.policy.name if r.policy else None, r.conditions) for r in settled] == [
        ("auto-stop", ())]
