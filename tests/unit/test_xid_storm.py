"""Xid storms folded (bot/domain/xid_storm.py and the planner), pure: one incident per host
and Xid with a count, an application's Xid never critical alone, its line as people read it."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.core.errors import ConfigError
from bot.domain.findings import Severity
from bot.domain.incident import Alert, AlertStatus
from bot.domain.planner import Planner, PlanOutcome, View
from bot.domain.xid import DEFAULT_POLICY, XidPolicy, xid_policy_from_extra
from bot.domain.xid_storm import XidTally, cleared, storm_line, tally, xid_of

T0 = datetime(2026, 12, 5, 10, 2, tzinfo=UTC).timestamp()


def xid_alert(host: str, xid: int, gpu: str = "1", n: int = 0) -> Alert:
    return Alert("webhook", host, "gpu_xid", summary=f"GPU {gpu} on {host} raised Xid {xid}",
                 severity=Severity.CRITICAL, labels={"gpu": gpu},
                 fingerprint=f"{host}-xid{xid}-{gpu}", identity=f"{host}-{xid}-{n}")


def storm(alerts: list[Alert],
          policy: XidPolicy = DEFAULT_POLICY) -> tuple[Planner, list[PlanOutcome]]:
    planner = Planner(View(), T0, 30.0, (f"INC-{n}" for n in itertools.count(1)),
                      xid_policy=policy)
    plan = planner.run(alerts)
    return planner, [o for o, _ in plan.outcomes]


def test_the_xid_an_alert_is_about() -> None:
    assert xid_of({"xid": "79"}, {}, "") == 79
    assert xid_of({}, {"xid": 48, "index": 2}, "") == 48
    assert xid_of({}, {}, "GPU 3 on gpu-04 raised Xid 45") == 45
    assert xid_of({}, {}, "disk full") is None and xid_of({"xid": "x"}, {}, "") is None


def test_500_xid45_alerts_from_3_hosts_are_3_incidents_none_critical_no_group() -> None:
    alerts = [xid_alert(f"gpu-0{i % 3 + 1}", 45, n=i) for i in range(500)]
    planner, outcomes = storm(alerts)
    assert outcomes.count(PlanOutcome.CREATED) == 3 and PlanOutcome.GROUPED not in outcomes
    incidents = sorted(planner.plan.incidents.values(), key=lambda i: i.host)
    assert [(i.host, i.count, i.severity) for i in incidents] == [
        ("gpu-01", 167, Severity.WARNING), ("gpu-02", 167, Severity.WARNING),
        ("gpu-03", 166, Severity.WARNING)]
    (t,) = incidents[0].xids
    assert (t.xid, t.count, t.gpus, t.app) == (45, 167, ("1",), True)
    assert not planner.plan.windows  # an application's storm opens no group window


def test_a_hardware_xid_beside_it_makes_the_incident_critical() -> None:
    planner, _ = storm([xid_alert("gpu-01", 45, n=1), xid_alert("gpu-01", 45, n=2),
                        xid_alert("gpu-01", 79, gpu="3", n=3)])
    (incident,) = planner.plan.incidents.values()
    assert incident.severity is Severity.CRITICAL
    assert [(t.xid, t.count, t.app) for t in incident.xids] == [(45, 2, True), (79, 1, False)]


def test_a_configured_rate_lets_an_application_xid_page() -> None:
    policy = xid_policy_from_extra({"xid_policy": {"storm": {"count": 100, "within_s": 60}}})
    planner, _ = storm([xid_alert("gpu-01", 45, n=i) for i in range(120)], policy)
    (incident,) = planner.plan.incidents.values()
    assert incident.severity is Severity.CRITICAL
    with pytest.raises(ConfigError, match=r"storm\.count"):
        xid_policy_from_extra({"xid_policy": {"storm": {"count": 1, "within_s": 60}}})
    custom = xid_policy_from_extra({"xid_policy": {"xids": {"45": {"fault": "gpu"}}}})
    planner, _ = storm([xid_alert("gpu-01", 45)], custom)
    (incident,) = planner.plan.incidents.values()
    assert incident.severity is Severity.CRITICAL  # the operator says 45 is the GPU's here


def test_an_xid_alert_ending_says_the_gpu_recovered() -> None:
    fired = xid_alert("gpu-01", 79, gpu="3")
    planner, _ = storm([fired])
    view = View(open_ids=dict(planner.plan.open_keys), fp_ids=dict(planner.plan.fp_index),
                incidents=dict(planner.plan.incidents))
    ended = replace(fired, status=AlertStatus.RESOLVED, identity="end")
    later = Planner(view, T0 + 300, 30.0, iter(()), xid_policy=DEFAULT_POLICY)
    later.run([ended])
    (incident,) = later.plan.incidents.values()
    (t,) = incident.xids
    assert (t.cleared_at, t.cleared_by) == (T0 + 300, "its alert ending (the GPU recovered)")


def test_the_line_people_read_and_a_cleared_xid() -> None:
    tallies: tuple[XidTally, ...] = ()
    for n in range(224):
        tallies = tally(tallies, 45, "1", T0 + n, DEFAULT_POLICY)
    now = T0 + 600
    assert storm_line(tallies, now, held=True) == (
        "Xid 45 ×224 since 10:02 UTC on GPU 1 (the application's Xid: no drain, no page on "
        "its own)")
    lost = tally((), 79, "3", T0, DEFAULT_POLICY)
    reset = cleared(lost, "the reset of GPU 3", T0 + 720)
    assert storm_line(reset, now, held=False) == (
        "Xid 79 since 10:02 UTC on GPU 3, cleared by the reset of GPU 3 at 10:14 UTC")
    again = tally(reset, 79, "3", T0 + 900, DEFAULT_POLICY)
    assert again[0].cleared_at is None and again[0].count == 2  # it fired again: live again
