"""Who may approve under a policy, on a real redis-server: the policy's approvers (users or
usergroups) decide its clicks, a refusal names the policy, other approvals keep today's
rules, and two_person needs two people."""

from __future__ import annotations

import time
from typing import Any

from redis import Redis

from bot.chat.interactions import StaticGroups
from bot.chat.policy_desk import PolicyApprovalDesk, claim_for_policy
from bot.domain.approval import ApprovalAction, ApprovalPolicy, ClaimOutcome
from bot.domain.policy import (
    Policy,
    PolicyDecision,
    PolicyMatch,
    PolicyMode,
    approval_policy_for,
)
from storage.approvals import ApprovalStore
from storage.events import IncidentEvents
from tests.helpers.clicks import queued

BASE = ApprovalPolicy(approvers=frozenset({"UALICE"}))
STOP = Policy("stop-autostarted-inference", PolicyMatch(action="systemd.stop_disable"),
              PolicyMode.AUTO, approvers=("S0GPUOPS",))
REBOOT = Policy("reboots", PolicyMatch(action="host.reboot"), approvers=("UALICE", "UCAROL"),
                two_person=True)


def rig(redis: Redis) -> tuple[ApprovalStore, PolicyApprovalDesk, list[Any]]:
    store, seen = ApprovalStore(redis), []
    desk = PolicyApprovalDesk(store, BASE, IncidentEvents(redis),
                              audit=lambda *e: seen.append(("audit", *e)),
                              groups=StaticGroups({"S0GPUOPS": {"UBOB"}}),
                              fleet={p.name: p for p in (STOP, REBOOT)})
    return store, desk, seen


def create(store: ApprovalStore, kind: str, policy: Policy | None) -> str:
    action = ApprovalAction(kind, {}, "a1", host="gpu-04", policy=policy.name if policy else "")
    rules = approval_policy_for(BASE, policy, kind)
    return store.create("INC-4", action, evidence_hash="e", requested_by="bot",
                        now=time.time(), policy=rules).id


def test_only_the_policys_approvers_may_click_and_the_refusal_names_it(redis: Redis) -> None:
    store, desk, seen = rig(redis)
    approval = create(store, "systemd.stop_disable", STOP)
    refused = desk.approve(approval, "UALICE")  # a global approver, not this policy's
    assert refused.outcome is ClaimOutcome.UNAUTHORISED
    assert refused.text == ("You are not allowed to approve or deny `systemd.stop_disable` on "
                            "gpu-04: policy `stop-autostarted-inference` lets only `S0GPUOPS` "
                            "approve it. This attempt was recorded.")
    assert desk.check(approval, "UALICE") is not None
    assert [e[3] for e in seen if e[0] == "audit"] == ["approval.refused", "approval.refused"]
    assert desk.check(approval, "UBOB") is None
    granted = desk.approve(approval, "UBOB")  # a member of S0GPUOPS
    assert granted.outcome is ClaimOutcome.CLAIMED
    assert queued(redis) == [("click.approved", approval, "UBOB")]  # the refusals queue none


def test_approvals_without_a_policy_keep_todays_rules(redis: Redis) -> None:
    store, desk, _ = rig(redis)
    approval = create(store, "systemd.stop_disable", None)
    assert desk.approve(approval, "UBOB").outcome is ClaimOutcome.UNAUTHORISED
    assert desk.approve(approval, "UALICE").outcome is ClaimOutcome.CLAIMED


def test_two_person_policy_needs_two(redis: Redis) -> None:
    store, desk, _ = rig(redis)
    approval = create(store, "host.reboot", REBOOT)
    assert desk.approve(approval, "UALICE").outcome is ClaimOutcome.NEED_SECOND_APPROVER
    assert desk.approve(approval, "UCAROL").outcome is ClaimOutcome.CLAIMED


def test_deny_under_a_policy(redis: Redis) -> None:
    store, desk, _ = rig(redis)
    approval = create(store, "systemd.stop_disable", STOP)
    assert desk.deny(approval, "UALICE", "no").outcome is ClaimOutcome.UNAUTHORISED
    assert desk.deny(approval, "UBOB", "not now").outcome is ClaimOutcome.DENIED
    assert queued(redis) == [("click.denied", approval, "UBOB")]


def test_an_auto_decision_approves_as_the_policy_once(redis: Redis) -> None:
    store, desk, _ = rig(redis)
    auto = PolicyDecision(PolicyMode.AUTO, STOP, "runs without a click", ("gpu-04",))
    approval = store.get(create(store, "systemd.stop_disable", STOP))
    assert approval is not None
    audit: list[tuple[Any, ...]] = []
    assert claim_for_policy(store, approval, auto, time.time(), lambda *e: audit.append(e))
    done = store.get(approval.id)
    assert done is not None and done.status == "approved"
    assert done.decided_by == "policy:stop-autostarted-inference"
    assert audit[0][1:3] == ("policy:stop-autostarted-inference", "approval.approved")
    assert audit[0][3]["policy"] == "stop-autostarted-inference"
    assert not claim_for_policy(store, approval, auto, time.time())  # once
    assert queued(redis) == []  # the flow acts on its own policy claim: no click event
    assert desk.approve(approval.id, "UBOB").outcome is ClaimOutcome.ALREADY_DONE


def test_no_auto_claim_for_shadow_or_two_person(redis: Redis) -> None:
    store, _, _ = rig(redis)
    shadow = PolicyDecision(PolicyMode.SHADOW, STOP, "r")
    approval = store.get(create(store, "systemd.stop_disable", STOP))
    assert approval is not None and not claim_for_policy(store, approval, shadow, time.time())
    two = PolicyDecision(PolicyMode.AUTO, REBOOT, "r")
    reboot = store.get(create(store, "host.reboot", REBOOT))
    assert reboot is not None and reboot.required == 2
    assert not claim_for_policy(store, reboot, two, time.time())
    after = store.get(reboot.id)
    assert after is not None and after.approvers == () and after.status == "pending"
