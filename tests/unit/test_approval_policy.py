"""The approval policy is pure: who may decide, per kind, self-approval, two-person, expiry."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from bot.config.policy import policy_from
from bot.config.settings import ApprovalSettings, load_settings
from bot.domain.approval import ANYONE, ApprovalPolicy, may_decide, refusal_is_self

POLICY = ApprovalPolicy(
    approvers=frozenset({"UALICE", "S0ONCALL"}),
    per_kind={"process.kill": frozenset({"UROOT"})},
    allow_self_approval=False,
    two_person=frozenset({"host.reboot"}),
    expiry_s=600,
)


@pytest.mark.parametrize(
    ("kind", "user", "groups", "requested_by", "expected"),
    [
        ("systemd.stop_disable", "UALICE", (), "alertmanager", True),  # listed user
        ("systemd.stop_disable", "UBOB", ("S0ONCALL",), "alertmanager", True),  # via usergroup
        ("systemd.stop_disable", "UBOB", (), "alertmanager", False),  # not a member
        ("systemd.stop_disable", "UBOB", ("S0OTHER",), "alertmanager", False),  # other group
        ("systemd.stop_disable", "UALICE", (), "UALICE", False),  # self-approval off
        ("process.kill", "UALICE", (), "alertmanager", False),  # per-kind list replaces global
        ("process.kill", "UROOT", (), "alertmanager", True),
        ("process.kill", "UBOB", ("S0ONCALL",), "alertmanager", False),
        ("systemd.stop_disable", "", (), "alertmanager", False),  # no user at all
    ],
)
def test_may_decide(
    kind: str, user: str, groups: tuple[str, ...], requested_by: str, expected: bool
) -> None:
    assert may_decide(POLICY, kind, user, groups, requested_by) is expected


def test_self_approval_allowed_when_configured() -> None:
    policy = ApprovalPolicy(approvers=frozenset({"UALICE"}), allow_self_approval=True)
    assert may_decide(policy, "k", "UALICE", (), "UALICE")
    assert not refusal_is_self(policy, "UALICE", "UALICE")
    assert refusal_is_self(POLICY, "UALICE", "UALICE")


def test_no_approvers_fails_closed_and_star_means_anyone() -> None:
    empty = ApprovalPolicy()
    users = ["UALICE", "UBOB", "W123"]
    assert not any(may_decide(empty, "k", u, ("S1",), "x") for u in users)
    anyone = ApprovalPolicy(approvers=frozenset({ANYONE}))
    assert all(may_decide(anyone, "k", u, (), "x") for u in users)


def test_two_person_and_groups() -> None:
    assert POLICY.required_for("host.reboot") == 2
    assert POLICY.required_for("systemd.stop_disable") == 1
    assert POLICY.all_groups() == frozenset({"S0ONCALL"})


def test_policy_from_settings_defaults_and_overrides(tmp_path: Path) -> None:
    default = policy_from([], ApprovalSettings.model_validate({}))
    assert default.expiry_s == 1800 and default.allow_self_approval and not default.approvers
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "slack: {approvers: [U1, S2]}\n"
        "approvals: {expiry_s: 60, allow_self_approval: false, two_person: [host.reboot],"
        " per_kind: {process.kill: [U9]}}\n"
    )
    from bot.config.policy import policy_from_settings

    policy = policy_from_settings(load_settings(cfg))
    assert policy.approvers == {"U1", "S2"} and policy.expiry_s == 60
    assert (
        policy.approvers_for("process.kill") == {"U9"} and policy.required_for("host.reboot") == 2
    )
    assert policy.all_groups() == {"S2"}


def test_decision_table_is_exhaustive_over_small_universe() -> None:
    """Every combination agrees with the rule written out longhand."""
    users, groups = ["UALICE", "UBOB", "UROOT"], [(), ("S0ONCALL",)]
    for kind, user, grp, req, self_ok in itertools.product(
        ["a.kind", "process.kill"], users, groups, ["UALICE", "alertmanager"], [True, False]
    ):
        policy = ApprovalPolicy(
            approvers=POLICY.approvers, per_kind=POLICY.per_kind, allow_self_approval=self_ok
        )
        allowed = policy.approvers_for(kind)
        expected = (self_ok or user != req) and (user in allowed or any(g in allowed for g in grp))
        assert may_decide(policy, kind, user, grp, req) is expected
