"""The approval policy built from settings: the one place config meets the pure policy.
(The fleet policies' gate, which needs stores, is built by ``bot.remediation.policy_gate``
``gate_from_settings``: config imports no remediation and no storage.)"""

from __future__ import annotations

from collections.abc import Iterable

from bot.config.fleet_policy import to_limits, to_policy
from bot.config.settings import ApprovalSettings, Settings
from bot.domain.approval import ApprovalPolicy
from bot.domain.maintenance import MaintenanceWindow
from bot.domain.policy import FleetLimits, Policy
from bot.domain.windows import parse_window


def policy_from_settings(settings: Settings) -> ApprovalPolicy:
    return policy_from(settings.slack.approvers, settings.approvals)


def policy_from(approvers: Iterable[str], cfg: ApprovalSettings) -> ApprovalPolicy:
    return ApprovalPolicy(
        approvers=frozenset(approvers),
        per_kind={k: frozenset(v) for k, v in cfg.per_kind.items()},
        allow_self_approval=cfg.allow_self_approval,
        two_person=frozenset(cfg.two_person),
        expiry_s=cfg.expiry_s,
    )


def policies_from_settings(settings: Settings) -> tuple[Policy, ...]:
    """The fleet policies in config order (first match wins), already validated at load."""
    return tuple(to_policy(p) for p in settings.policies)


def fleet_limits_from_settings(settings: Settings) -> FleetLimits:
    return to_limits(settings.policy_limits)


def maintenance_from_settings(settings: Settings) -> tuple[MaintenanceWindow, ...]:
    """The recurring windows of the config, for ``SilenceStore.set_maintenance`` at start."""
    return tuple(MaintenanceWindow(m.hosts, tuple(m.kinds), parse_window(m.every), m.reason)
                 for m in settings.maintenance)
