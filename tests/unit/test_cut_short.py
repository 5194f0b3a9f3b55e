"""The steps this process could not finish (issue 39): a step Redis refused is taken over
at the next period (only while nobody took it since); one waiting for its silent host is
left to its deadline, read back meanwhile."""

from __future__ import annotations

from bot.domain.lifecycle import IncidentState
from bot.flow.reconcile import CutShort
from storage.inflight import Inflight

S = IncidentState


def entry(owner: str, state: IncidentState = S.DIAGNOSING) -> Inflight:
    return Inflight("INC-7", state, owner, deadline=1e12)


def test_a_refused_step_is_abandoned_while_it_is_still_its_owners() -> None:
    cut = CutShort()
    cut.add("INC-7", "oom", owner="vm:1:2")
    assert cut.reason_for(entry("vm:1:2")) == "interrupted by a Redis refusal (oom)"
    assert cut.reason_for(entry("")) is not None  # released (an open incident's first step)
    assert cut.reason_for(entry("vm:1:3")) is None  # someone took it since: theirs
    cut.discard("INC-7")
    assert cut.reason_for(entry("vm:1:2")) is None and not cut


def test_a_step_waiting_for_its_host_is_not_taken_over_early() -> None:
    cut = CutShort()
    cut.add("INC-7", "the host stopped answering", owner="vm:1:2", wait_for_host=True)
    assert cut.reason_for(entry("vm:1:2", S.REMEDIATING)) is None
    assert cut.waiting_for_hosts() == [("INC-7", "the host stopped answering")]
    assert cut.ids() == {"INC-7"}
