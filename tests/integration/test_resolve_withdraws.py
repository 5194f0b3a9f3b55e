"""A resolve withdraws the incident's pending approvals in the same transaction (issue 25),
on a real redis-server: by its alert clearing (ingest), by a person, or by the flow.

The proof of "same transaction": an observer reads the incident's state and its approval's
status in one MULTI, as fast as it can, while incidents resolve; it must never see the
incident resolved with the approval still pending (and it must see both sides)."""

from __future__ import annotations

import threading
from dataclasses import replace

from redis import Redis

from bot.chat.interactions import ApprovalDesk, audit_sink
from bot.domain.approval import (
    ApprovalAction,
    ApprovalPolicy,
    ApprovalStatus,
    ClaimOutcome,
    Resolver,
)
from bot.domain.findings import Severity
from bot.domain.incident import Alert, AlertStatus
from bot.domain.lifecycle import IncidentState
from storage import keys
from storage.approvals import ApprovalStore
from storage.audit import AuditLog
from storage.events import IncidentEvents
from storage.incidents import IncidentStore
from tests.helpers.clicks import queued

POLICY = ApprovalPolicy(approvers=frozenset({"UALICE"}))
STOP = ApprovalAction("systemd.stop_disable", {"unit": "vllm.service"}, "a1")


def opened(incidents: IncidentStore, host: str = "gpu-01") -> str:
    incident, created = incidents.open_or_fold(
        Alert(source="alertmanager", host=host, kind="vram_idle", severity=Severity.CRITICAL))
    assert created
    return str(incident.id)


def cleared(host: str = "gpu-01") -> Alert:
    return Alert(source="alertmanager", host=host, kind="vram_idle", status=AlertStatus.RESOLVED)


def offer(approvals: ApprovalStore, incident_id: str, now: float) -> str:
    return approvals.create(incident_id, STOP, evidence_hash="e", requested_by="alertmanager",
                            now=now, policy=POLICY).id


def test_an_alert_that_clears_withdraws_pending_approvals_and_audits_each(redis: Redis) -> None:
    incidents, approvals = IncidentStore(redis, group_wait_s=0), ApprovalStore(redis)
    incident_id = opened(incidents)
    now = incidents.clock()
    pending, other = offer(approvals, incident_id, now), offer(approvals, incident_id, now)
    denied = offer(approvals, incident_id, now)
    assert approvals.deny(denied, "UALICE", "no", now, POLICY).changed

    incidents.ingest([cleared()])

    assert incidents.require(incident_id).state is IncidentState.RESOLVED
    for approval_id in (pending, other):
        record = approvals.get(approval_id)
        assert record is not None and record.status is ApprovalStatus.CANCELLED
        assert record.resolved_by is Resolver.ALERT and record.decided_by == "alertmanager"
        assert record.reason == "incident resolved"
    untouched = approvals.get(denied)
    assert untouched is not None and untouched.status is ApprovalStatus.DENIED
    assert approvals.pending() == []
    withdrawn = [(e.actor, e.detail["approval_id"], e.detail["resolved_by"])
                 for e in AuditLog(redis).timeline(incident_id) if e.action == "approval.cancelled"]
    assert sorted(withdrawn) == sorted([("alertmanager", pending, "alert"),
                                        ("alertmanager", other, "alert")])
    # a late click: nothing claimed, the record says why
    late = approvals.claim(pending, "UALICE", now + 1, POLICY)
    assert late.outcome is ClaimOutcome.CANCELLED and not late.changed


def test_a_person_or_the_flow_resolving_withdraws_them_too(redis: Redis) -> None:
    incidents, approvals = IncidentStore(redis, group_wait_s=0), ApprovalStore(redis)
    by_person, by_bot = opened(incidents, "gpu-01"), opened(incidents, "gpu-02")
    a = offer(approvals, by_person, incidents.clock())
    b = offer(approvals, by_bot, incidents.clock())
    incidents.update(by_person, lambda i: replace(i, resolved_by="UBOB"))
    incidents.transition(by_person, IncidentState.RESOLVED, "UBOB", "resolved by a person")
    incidents.transition(by_bot, IncidentState.RESOLVED, "incident-bot", "fixed")
    first, second = approvals.get(a), approvals.get(b)
    assert first is not None and (first.status, first.resolved_by, first.decided_by) == (
        ApprovalStatus.CANCELLED, Resolver.PERSON, "UBOB")
    assert second is not None and (second.status, second.resolved_by, second.decided_by) == (
        ApprovalStatus.CANCELLED, Resolver.BOT, "incident-bot")


def test_a_click_that_won_before_the_resolve_keeps_its_win(redis: Redis) -> None:
    incidents, approvals = IncidentStore(redis, group_wait_s=0), ApprovalStore(redis)
    incident_id = opened(incidents)
    won = offer(approvals, incident_id, incidents.clock())
    assert approvals.claim(won, "UALICE", incidents.clock(), POLICY).outcome is ClaimOutcome.CLAIMED
    incidents.ingest([cleared()])
    record = approvals.get(won)
    assert record is not None and record.status is ApprovalStatus.APPROVED
    assert not [e for e in AuditLog(redis).timeline(incident_id)
                if e.action == "approval.cancelled"]


def test_no_observer_sees_an_incident_resolved_with_a_pending_approval(redis: Redis) -> None:
    incidents, approvals = IncidentStore(redis, group_wait_s=0), ApprovalStore(redis)
    rounds = 40
    pairs = []
    for n in range(rounds):
        incident_id = opened(incidents, f"gpu-{n:02d}")
        pairs.append((incident_id, offer(approvals, incident_id, incidents.clock())))
    seen: set[tuple[str, str]] = set()
    done = threading.Event()

    def observe() -> None:
        with redis.pipeline(transaction=True) as pipe:
            while not done.is_set():
                for incident_id, approval_id in pairs:
                    pipe.hget(keys.incident(incident_id), "state")
                    pipe.hget(keys.approval(approval_id), "status")
                row = pipe.execute()  # one MULTI/EXEC: a consistent snapshot of all pairs
                seen.update(zip(row[::2], row[1::2], strict=True))

    observer = threading.Thread(target=observe)
    observer.start()
    try:
        for n, (incident_id, _) in enumerate(pairs):  # the observer runs in between
            if n % 2:  # by a person (the Resolve button's path)
                incidents.transition(incident_id, IncidentState.RESOLVED, "UBOB", "by hand")
            else:  # by its alert clearing
                incidents.ingest([cleared(f"gpu-{n:02d}")])
    finally:
        done.set()
        observer.join(10)
    assert ("resolved", "pending") not in seen, seen
    assert ("open", "pending") in seen and ("resolved", "cancelled") in seen, seen


def test_an_approval_offered_after_the_resolve_is_stored_withdrawn(redis: Redis) -> None:
    """A diagnosis that finishes after the alert cleared still offers its action: it is
    stored withdrawn, audited, never pending."""
    incidents, approvals = IncidentStore(redis, group_wait_s=0), ApprovalStore(redis)
    incident_id = opened(incidents)
    incidents.ingest([cleared()])
    late = approvals.create(incident_id, STOP, evidence_hash="e", requested_by="alertmanager",
                            now=incidents.clock(), policy=POLICY)
    assert (late.status, late.resolved_by, late.decided_by) == (
        ApprovalStatus.CANCELLED, Resolver.ALERT, "alertmanager")
    stored = approvals.get(late.id)
    assert stored is not None and stored.status is ApprovalStatus.CANCELLED
    assert approvals.pending() == []
    assert [(e.actor, e.detail["approval_id"]) for e in AuditLog(redis).timeline(incident_id)
            if e.action == "approval.cancelled"] == [("alertmanager", late.id)]
    clicked = approvals.claim(late.id, "UALICE", incidents.clock(), POLICY)
    assert clicked.outcome is ClaimOutcome.CANCELLED and not clicked.changed


def test_a_pending_approval_left_after_a_resolve_is_withdrawn_by_the_first_click(
        redis: Redis) -> None:
    """Belt and braces (a record stored pending before this rule existed): the resolve's
    marker makes the first click withdraw it instead of running it."""
    incidents, approvals = IncidentStore(redis, group_wait_s=0), ApprovalStore(redis)
    incident_id = opened(incidents)
    now = incidents.clock()
    late, late_too = offer(approvals, incident_id, now), offer(approvals, incident_id, now)
    redis.delete(keys.approvals_of_incident(incident_id))  # as if offered after the resolve
    incidents.ingest([cleared()])
    for approval_id in (late, late_too):
        record = approvals.get(approval_id)
        assert record is not None and record.status is ApprovalStatus.PENDING
    clicked = approvals.claim(late, "UALICE", incidents.clock(), POLICY)
    assert clicked.outcome is ClaimOutcome.CANCELLED and clicked.changed
    assert clicked.approval is not None and clicked.approval.resolved_by is Resolver.ALERT
    assert clicked.approval.decided_by == "alertmanager"
    denied = approvals.deny(late_too, "UALICE", "x", incidents.clock(), POLICY)
    assert denied.outcome is ClaimOutcome.CANCELLED and denied.changed
    assert approvals.pending() == []
    assert approvals.claim(late, "UALICE", incidents.clock(), POLICY).changed is False


def test_the_desk_tells_a_late_clicker_who_resolved_and_audits_both_sides(
        redis: Redis) -> None:
    incidents, approvals = IncidentStore(redis, group_wait_s=0), ApprovalStore(redis)
    audit = AuditLog(redis)
    desk = ApprovalDesk(approvals, POLICY, IncidentEvents(redis), audit=audit_sink(audit))
    incident_id = opened(incidents)
    stale = offer(approvals, incident_id, incidents.clock())
    redis.delete(keys.approvals_of_incident(incident_id))  # left pending (before this rule)
    withdrawn = offer(approvals, incident_id, incidents.clock())
    incidents.ingest([cleared()])

    first = desk.approve(withdrawn, "UALICE")  # withdrawn by the resolve
    second = desk.approve(stale, "UALICE")  # withdrawn by this click
    assert queued(redis) == []  # nothing for the flow to run
    assert first.outcome is second.outcome is ClaimOutcome.CANCELLED
    for decision in (first, second):
        assert decision.text.startswith(f"Incident {incident_id} was resolved at ")
        assert decision.text.endswith(" UTC by the alert: nothing ran.")
    trail = [(e.actor, e.action, e.detail.get("approval_id"), e.detail.get("resolved_by"))
             for e in audit.timeline(incident_id) if e.action.startswith("approval.")]
    assert sorted(trail) == sorted([
        ("alertmanager", "approval.cancelled", withdrawn, "alert"),
        ("UALICE", "approval.withdrawn_click", withdrawn, "alert"),
        ("alertmanager", "approval.cancelled", stale, "alert"),
        ("UALICE", "approval.withdrawn_click", stale, "alert")])
