"""The pure batch planner: dedup, fold, grouping windows, silences, resolution."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace

from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.incident import Alert, AlertStatus, GroupWindow, Incident, SilenceRule
from bot.domain.lifecycle import IncidentState
from bot.domain.planner import Plan, Planner, PlanOutcome, View


def ids(first: int = 1) -> Iterable[str]:
    return (f"INC-{n}" for n in itertools.count(first))


def fire(host: str, kind: str = "vram_idle", fp: str = "", ident: str | None = None) -> Alert:
    return Alert("alertmanager", host, kind, fingerprint=fp, identity=ident)


def resolve(host: str, kind: str = "vram_idle", fp: str = "", ident: str | None = None) -> Alert:
    return Alert("alertmanager", host, kind, AlertStatus.RESOLVED, fingerprint=fp, identity=ident)


def plan(
    alerts: list[Alert], view: View | None = None, now: float = 100.0, wait: float = 30.0
) -> Plan:
    first = 1 + max((int(i.split("-")[1]) for i in (view.incidents if view else {})), default=0)
    return Planner(view or View(), now, wait, iter(ids(first))).run(alerts)


def view_after(p: Plan) -> View:
    """What Redis would hold after ``p`` was written."""
    return View(
        open_ids={k: v for k, v in p.open_keys.items() if v},
        fp_ids={k: v for k, v in p.fp_index.items() if v},
        incidents=dict(p.incidents),
    )


def outcomes(p: Plan) -> list[str]:
    return [o.value for o, _ in p.outcomes]


def events(p: Plan, kind: str) -> list[str]:
    return [e.incident_id for e in p.events if e.kind == kind]


def test_duplicate_delivery_is_applied_once() -> None:
    p = plan([fire("a", fp="f", ident="x"), fire("a", fp="f", ident="x")])
    assert outcomes(p) == ["created", "duplicate"]
    assert p.incidents["INC-1"].count == 1
    assert p.seen == [Alert("s", "h", "k", identity="x").dedup_key]


def test_already_seen_in_redis_is_a_duplicate() -> None:
    key = fire("a", ident="x").dedup_key
    assert key is not None
    p = plan([fire("a", ident="x")], View(seen={key}))
    assert outcomes(p) == ["duplicate"] and not p.incidents and not p.events


def test_repeats_fold_into_one_incident_per_host_and_kind() -> None:
    p = plan([fire("a", fp="1"), fire("a", fp="2"), fire("a", "disk_full")])
    assert outcomes(p) == ["created", "folded", "created"]
    assert p.incidents["INC-1"].count == 2 and p.incidents["INC-1"].fingerprints == ("1", "2")
    assert p.open_keys == {("a", "vram_idle"): "INC-1", ("a", "disk_full"): "INC-2"}


def test_folds_give_one_event_per_incident_per_batch() -> None:
    p = plan([fire("a", fp="1")] * 4 + [fire("b", "disk_full")] * 2)
    folded = [(e.incident_id, e.fields["count"]) for e in p.events if e.kind == "incident.folded"]
    assert folded == [("INC-1", "4"), ("INC-2", "2")]
    assert list(p.fp_index) == ["1", p.incidents["INC-2"].fingerprints[0]]  # written once each


def test_storm_of_hosts_groups_under_the_first() -> None:
    p = plan([fire(f"h{i:03d}") for i in range(50)])
    assert outcomes(p) == ["created"] + ["grouped"] * 49
    parent = p.incidents["INC-1"]
    assert len(parent.hosts) == 50 and parent.hosts[0] == "h000"
    assert events(p, "incident.opened") == ["INC-1"]
    assert len(events(p, "incident.grouped")) == 49
    assert all(p.incidents[f"INC-{i}"].parent_id == "INC-1" for i in range(2, 51))


def test_kinds_group_separately() -> None:
    p = plan([fire("a"), fire("b"), fire("a", "disk_full"), fire("b", "disk_full")])
    assert outcomes(p) == ["created", "grouped", "created", "grouped"]
    assert sorted(events(p, "incident.opened")) == ["INC-1", "INC-3"]


def test_window_expiry_starts_a_new_parent() -> None:
    parent = Incident.open_from("INC-1", fire("a"), now=0.0)
    view = View(
        windows={"vram_idle": GroupWindow("vram_idle", "INC-1", until=30.0)},
        open_ids={("a", "vram_idle"): "INC-1"},
        incidents={"INC-1": parent},
    )
    inside = plan([fire("b")], view, now=29.9)
    after = plan([fire("b")], view, now=30.0)
    assert outcomes(inside) == ["grouped"] and outcomes(after) == ["created"]
    assert after.windows["vram_idle"] == GroupWindow("vram_idle", "INC-2", until=60.0)


def test_resolved_parent_does_not_adopt() -> None:
    parent = Incident.open_from("INC-1", fire("a"), now=0.0)
    parent = Incident(**{**parent.__dict__, "state": IncidentState.RESOLVED})
    view = View(
        windows={"vram_idle": GroupWindow("vram_idle", "INC-1", until=30.0)},
        incidents={"INC-1": parent},
    )
    assert outcomes(plan([fire("b")], view, now=5.0)) == ["created"]


def test_no_window_when_group_wait_is_zero() -> None:
    p = plan([fire("a"), fire("b")], wait=0.0)
    assert outcomes(p) == ["created", "created"] and not p.windows


def test_silence_drops_firing_without_marking_seen() -> None:
    view = View(silences={("a", "*"): SilenceRule("a", "*", until=200.0, author="ops")})
    p = plan([fire("a", ident="x"), fire("b", ident="y")], view, now=100.0)
    assert outcomes(p) == ["silenced", "created"]
    assert p.seen == [fire("b", ident="y").dedup_key]  # the silenced one counts again later
    expired = plan([fire("a", ident="x")], view, now=200.0)
    assert outcomes(expired) == ["created"]


def test_kind_wide_silence() -> None:
    view = View(silences={("*", "disk_full"): SilenceRule("*", "disk_full", 1e12, "ops")})
    assert outcomes(plan([fire("a", "disk_full"), fire("a")], view)) == ["silenced", "created"]


def test_resolve_needs_every_fingerprint_gone() -> None:
    first = plan([fire("a", fp="1"), fire("a", fp="2")])
    view = view_after(first)
    p = plan([resolve("a", fp="1")], view)
    assert outcomes(p) == ["cleared"] and p.incidents["INC-1"].state is IncidentState.OPEN
    p2 = plan([resolve("a", fp="1"), resolve("a", fp="2")], view)
    assert outcomes(p2) == ["cleared", "resolved"]
    assert p2.incidents["INC-1"].state is IncidentState.RESOLVED
    assert p2.open_keys[("a", "vram_idle")] is None and events(p2, "incident.resolved") == ["INC-1"]
    assert [n.action for n in p2.notes] == ["transition"]


def test_resolve_without_fingerprint_uses_host_and_kind() -> None:
    first = plan([fire("a", fp="agent-specific")])
    view = view_after(first)
    assert outcomes(plan([resolve("a")], view)) == ["resolved"]
    assert outcomes(plan([resolve("a", fp="other")], view)) == ["unmatched"]


def test_resolve_during_remediation_keeps_state() -> None:
    incident = Incident.open_from("INC-1", fire("a", fp="1"), now=0.0)
    incident = Incident(**{**incident.__dict__, "state": IncidentState.REMEDIATING})
    view = View(
        open_ids={("a", "vram_idle"): "INC-1"}, fp_ids={"1": "INC-1"}, incidents={"INC-1": incident}
    )
    p = plan([resolve("a", fp="1")], view)
    assert outcomes(p) == ["cleared"]
    kept = p.incidents["INC-1"]
    assert kept.state is IncidentState.REMEDIATING and kept.cleared_at == 100.0
    assert events(p, "incident.alert_cleared") == ["INC-1"]


def test_refire_after_resolution_opens_a_new_incident() -> None:
    p = plan(
        [
            fire("a", fp="1", ident="s1"),
            resolve("a", fp="1", ident="r1"),
            fire("a", fp="1", ident="s2"),
        ],
        wait=0.0,
    )
    assert outcomes(p) == ["created", "resolved", "created"]
    assert p.open_keys[("a", "vram_idle")] == "INC-2"


def test_unmatched_resolve_is_harmless() -> None:
    p = plan([resolve("nobody", fp="zz")])
    assert outcomes(p) == ["unmatched"] and not p.incidents


def test_outcome_values_are_stable() -> None:
    assert {o.value for o in PlanOutcome} == {
        "created",
        "grouped",
        "folded",
        "duplicate",
        "silenced",
        "resolved",
        "cleared",
        "unmatched",
    }


def test_reboot_alert_ending_does_not_resolve() -> None:
    first = plan([fire("a", "vm_restart", fp="boot")])
    p = plan([resolve("a", "vm_restart", fp="boot")], view_after(first))
    assert outcomes(p) == ["cleared"] and p.incidents["INC-1"].state is IncidentState.OPEN
    assert events(p, "incident.alert_cleared") == ["INC-1"]


def _diagnosed(kind: str, code: str, state: IncidentState) -> View:
    """An open incident of ``kind`` whose diagnosis found ``code`` (critical)."""
    incident = Incident.open_from("INC-1", fire("a", kind, fp="1"), now=0.0)
    found = Diagnosis("a", "gpu_health", DiagnosisStatus.OK, 0.1,
                      (Finding(code, Severity.CRITICAL, f"{code} on GPU 5"),))
    incident = replace(incident, state=state, diagnosis=found)
    return View(open_ids={("a", kind): "INC-1"}, fp_ids={"1": "INC-1"},
                incidents={"INC-1": incident})


def test_a_hardware_fault_outlives_its_alert() -> None:
    """Issue 35: a double-bit ECC (or Xid 79, a missing GPU) is still there when the
    exporter stops reporting it; the incident stays open and records the alert cleared."""
    for kind, code in (("gpu_ecc", "gpu.broken"), ("vram_idle", "gpu.broken"),
                       ("gpu_missing", "gpu.missing")):
        for state in (IncidentState.NO_ACTION, IncidentState.AWAITING_APPROVAL,
                      IncidentState.VERIFIED):
            p = plan([resolve("a", kind, fp="1")], _diagnosed(kind, code, state))
            kept = p.incidents["INC-1"]
            assert outcomes(p) == ["cleared"] and kept.state is state, (kind, state)
            assert kept.cleared_at == 100.0 and events(p, "incident.alert_cleared") == ["INC-1"]
            assert not events(p, "incident.resolved")
    # a software finding resolves with its alert, as before
    p = plan([resolve("a", "vram_idle", fp="1")],
             _diagnosed("vram_idle", "gpu.idle_vram_held", IncidentState.AWAITING_APPROVAL))
    assert outcomes(p) == ["resolved"]


def test_a_hardware_alert_cleared_before_its_diagnosis_keeps_the_incident() -> None:
    first = plan([fire("a", "gpu_xid", fp="x")])
    p = plan([resolve("a", "gpu_xid", fp="x")], view_after(first))
    assert outcomes(p) == ["cleared"] and p.incidents["INC-1"].state is IncidentState.OPEN
    soft = plan([fire("b", "vram_idle", fp="v")])
    assert outcomes(plan([resolve("b", "vram_idle", fp="v")], view_after(soft))) == ["resolved"]
