"""The approval policy built from settings: the one place config meets the pure policy."""

from __future__ import annotations

from collections.abc import Iterable

from bot.config.settings import ApprovalSettings, Settings
from bot.domain.approval import ApprovalPolicy


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
