"""ApprovalStore on a real redis-server: atomic claims, expiry, two-person, deny, restarts."""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace

from redis import Redis
from redis.exceptions import ConnectionError

from bot.domain.approval import (
    Approval,
    ApprovalAction,
    ApprovalPolicy,
    ApprovalStatus,
    ClaimOutcome,
    may_decide,
)
from bot.rig.localredis import LocalRedis
from storage import keys
from storage.approvals import ApprovalStore
from storage.connection import connect

POLICY = ApprovalPolicy(
    approvers=frozenset({"UALICE", "UBOB", "S0ONCALL", *(f"U{i:03d}" for i in range(20))}),
    allow_self_approval=False,
    two_person=frozenset({"host.reboot"}),
    expiry_s=600,
)
ACTION = ApprovalAction("systemd.stop_disable", {"unit": "x.service"}, "a1",
                        commands=("systemctl stop x.service",))
T0 = 1_700_000_000.0


def make(
    store: ApprovalStore, kind: str = "systemd.stop_disable", requested_by: str = "alertmanager"
) -> Approval:
    return store.create(
        "42",
        replace(ACTION, kind=kind),
        evidence_hash="e" * 64,
        requested_by=requested_by,
        now=T0,
        policy=POLICY,
    )


def test_create_roundtrip_and_indexes(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a = make(store)
    assert len(a.id) >= 16 and a.expires_at == T0 + 600 and a.required == 1
    assert store.get(a.id) == a
    assert redis.zscore(keys.approvals_pending(), a.id) == T0 + 600
    ttl = redis.ttl(keys.approval(a.id))
    assert isinstance(ttl, int) and 0 < ttl <= 600 + 30 * 86400
    assert [p.id for p in store.pending()] == [a.id] and [
        x.id for x in store.for_incident("42")
    ] == [a.id]
    store.attach_message(a.id, "C1", "1.2")
    got = store.get(a.id)
    assert got is not None and (got.channel, got.message_ts) == ("C1", "1.2")
    assert make(store).id != a.id  # fresh random ids


def test_claim_once_then_already_done(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a = make(store)
    first = store.claim(a.id, "UALICE", T0 + 1, POLICY)
    assert first.outcome is ClaimOutcome.CLAIMED and first.changed
    assert first.approval is not None and first.approval.status is ApprovalStatus.APPROVED
    assert first.approval.decided_by == "UALICE" and first.approval.approvers == ("UALICE",)
    again = store.claim(a.id, "UBOB", T0 + 2, POLICY)
    assert again.outcome is ClaimOutcome.ALREADY_DONE and not again.changed
    assert store.pending() == [] and redis.zscore(keys.approvals_pending(), a.id) is None


def test_unauthorised_unknown_and_forged_ids(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a = make(store)
    refused = store.claim(a.id, "UMALLORY", T0 + 1, POLICY)
    assert refused.outcome is ClaimOutcome.UNAUTHORISED and not refused.changed
    assert store.claim(a.id, "UBOB", T0 + 1, POLICY, ["S0ONCALL"]).outcome is ClaimOutcome.CLAIMED
    assert store.claim("nope", "UALICE", T0, POLICY).outcome is ClaimOutcome.NOT_FOUND
    assert (
        store.claim("x:*", "UALICE", T0, POLICY).outcome is ClaimOutcome.NOT_FOUND
    )  # never reaches a key
    assert store.claim(a.id, "UALICE,UBOB", T0, POLICY).outcome is ClaimOutcome.UNAUTHORISED


def test_self_approval_refused_when_configured(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a = make(store, requested_by="UALICE")
    assert store.claim(a.id, "UALICE", T0 + 1, POLICY).outcome is ClaimOutcome.UNAUTHORISED
    assert store.claim(a.id, "UBOB", T0 + 1, POLICY).outcome is ClaimOutcome.CLAIMED


def test_expired_click_marks_expired(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a = make(store)
    late = store.claim(a.id, "UALICE", T0 + 600, POLICY)
    assert late.outcome is ClaimOutcome.EXPIRED and late.changed
    assert late.approval is not None and late.approval.status is ApprovalStatus.EXPIRED
    assert store.claim(a.id, "UALICE", T0 + 700, POLICY).outcome is ClaimOutcome.EXPIRED
    assert store.deny(a.id, "UALICE", "late", T0 + 700, POLICY).outcome is ClaimOutcome.EXPIRED


def test_two_person_rule(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a = make(store, kind="host.reboot")
    assert a.required == 2
    first = store.claim(a.id, "UALICE", T0 + 1, POLICY)
    assert first.outcome is ClaimOutcome.NEED_SECOND_APPROVER and first.changed
    same = store.claim(a.id, "UALICE", T0 + 2, POLICY)
    assert same.outcome is ClaimOutcome.NEED_SECOND_APPROVER and not same.changed
    second = store.claim(a.id, "UBOB", T0 + 3, POLICY)
    assert second.outcome is ClaimOutcome.CLAIMED and second.approval is not None
    assert second.approval.approvers == ("UALICE", "UBOB") and second.approval.decided_by == "UBOB"


def test_deny_and_claim_exclude_each_other(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a, b = make(store), make(store)
    denied = store.deny(a.id, "UBOB", "not during the run", T0 + 1, POLICY)
    assert denied.outcome is ClaimOutcome.DENIED and denied.changed
    assert denied.approval is not None and denied.approval.reason == "not during the run"
    after = store.claim(a.id, "UALICE", T0 + 2, POLICY)
    assert after.outcome is ClaimOutcome.DENIED and not after.changed
    assert store.deny(a.id, "UALICE", "again", T0 + 2, POLICY).outcome is ClaimOutcome.ALREADY_DONE
    assert store.claim(b.id, "UALICE", T0 + 1, POLICY).outcome is ClaimOutcome.CLAIMED
    assert store.deny(b.id, "UBOB", "too late", T0 + 2, POLICY).outcome is ClaimOutcome.ALREADY_DONE
    assert store.deny(b.id, "UMALLORY", "x", T0 + 2, POLICY).outcome is ClaimOutcome.UNAUTHORISED


def test_expire_due_sweeps_only_overdue(redis: Redis) -> None:
    store = ApprovalStore(redis)
    a, b = make(store), make(store)
    late = store.create(
        "43", ACTION, evidence_hash="e", requested_by="x", now=T0 + 500, policy=POLICY
    )
    store.claim(b.id, "UALICE", T0 + 1, POLICY)
    expired = store.expire_due(T0 + 600)
    assert [x.id for x in expired] == [a.id] and expired[0].status is ApprovalStatus.EXPIRED
    assert store.expire_due(T0 + 600) == []  # idempotent
    assert [p.id for p in store.pending()] == [late.id]


def test_concurrent_clicks_across_replicas_claim_once(
    redis_server: LocalRedis, redis: Redis
) -> None:
    """20 threads, each its own connection (as separate bot replicas): exactly one CLAIMED."""
    a = make(ApprovalStore(redis))
    outcomes: list[ClaimOutcome] = []
    barrier = threading.Barrier(20)

    def click(i: int) -> None:
        client = connect(redis_server.url)
        store = ApprovalStore(client)
        barrier.wait()
        outcomes.append(store.claim(a.id, f"U{i:03d}", T0 + 1, POLICY).outcome)
        client.close()

    threads = [threading.Thread(target=click, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(ClaimOutcome.CLAIMED) == 1
    assert outcomes.count(ClaimOutcome.ALREADY_DONE) == 19


def test_pending_approval_survives_redis_restart(redis_server: LocalRedis, redis: Redis) -> None:
    """AOF with appendfsync always: a SIGKILLed redis-server comes back with the approval."""
    old = ApprovalStore(redis)
    a, b = make(old), make(old)
    redis_server.kill()
    redis_server.start()
    client = connect(redis_server.url)
    try:
        store = ApprovalStore(client)  # a restarted bot process
        assert store.get(a.id) == a
        assert store.claim(a.id, "UALICE", T0 + 1, POLICY).outcome is ClaimOutcome.CLAIMED
    finally:
        client.close()
    # the surviving process: its scripts are gone from the fresh server and get reloaded
    for _ in range(3):  # the first use of a pooled connection may see the old socket closed
        try:
            assert old.claim(b.id, "UBOB", T0 + 1, POLICY).outcome is ClaimOutcome.CLAIMED
            break
        except ConnectionError:
            continue
    else:
        raise AssertionError("old client never reconnected")


def test_the_script_decides_exactly_as_the_domain_rule(redis: Redis) -> None:
    """The one-round-trip claim checks rights inside Lua: over a grid of policies, kinds,
    users, groups and requesters it answers UNAUTHORISED exactly when ``may_decide`` says no."""
    store = ApprovalStore(redis)
    policies = [
        POLICY,
        ApprovalPolicy(approvers=frozenset({"UALICE", "S0ONCALL"}), allow_self_approval=False,
                       per_kind={"process.kill": frozenset({"UROOT"})}),
        ApprovalPolicy(approvers=frozenset({"*"}), allow_self_approval=True),
        ApprovalPolicy(),  # nobody
    ]
    kinds = ["systemd.stop_disable", "process.kill"]
    users = ["UALICE", "UBOB", "UROOT", "U,ALICE"]
    groups = [(), ("S0ONCALL",)]
    requesters = ["alertmanager", "UALICE"]
    seen = set()
    for policy, kind, user, group, requester in itertools.product(
            policies, kinds, users, groups, requesters):
        a = store.create("42", replace(ACTION, kind=kind), evidence_hash="e" * 64,
                         requested_by=requester, now=T0, policy=policy)
        got = store.claim(a.id, user, T0 + 1, policy, group).outcome
        allowed = "," not in user and may_decide(policy, kind, user, group, requester)
        assert (got is not ClaimOutcome.UNAUTHORISED) is allowed, (policy, kind, user, group,
                                                                   requester, got)
        seen.add(allowed)
    assert seen == {True, False}
