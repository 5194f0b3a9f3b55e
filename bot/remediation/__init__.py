"""Remediation: approved actions that run once, prove they worked, and can be undone.

Public API (the Slack flow, the CLI and the demo call these):
``execute``, ``plan``, ``revert``, ``revert_result``, ``offers``, ``chain_resumes``,
``ActionResult``, ``Outcome``, ``CapturedState``, ``RemediationOptions``, ``AuditSink``,
``ActionRefused``, ``CATALOG``. The actions themselves are ``bot.remediation.actions``.

The names are loaded on first use (PEP 562): a playbook that names an action class
(``bot.remediation.actions.systemd.StopDisable``) does not load the executor and its
metrics.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Verification
    from bot.domain.host_state import CapturedState
    from bot.remediation.catalog import CATALOG, ActionRefused, plan
    from bot.remediation.executor import AuditSink, cli_incident_id, execute
    from bot.remediation.followup import chain_resumes, offers
    from bot.remediation.options import RemediationOptions, options_from_extra
    from bot.remediation.reverter import revert, revert_result

_WHERE = {
    "ActionResult": "bot.domain.action_result", "CommandRecord": "bot.domain.action_result",
    "Outcome": "bot.domain.action_result", "Verification": "bot.domain.action_result",
    "CapturedState": "bot.domain.host_state", "CATALOG": "bot.remediation.catalog",
    "ActionRefused": "bot.remediation.catalog", "plan": "bot.remediation.catalog",
    "AuditSink": "bot.remediation.executor", "cli_incident_id": "bot.remediation.executor",
    "execute": "bot.remediation.executor", "chain_resumes": "bot.remediation.followup",
    "offers": "bot.remediation.followup", "RemediationOptions": "bot.remediation.options",
    "options_from_extra": "bot.remediation.options", "revert": "bot.remediation.reverter",
    "revert_result": "bot.remediation.reverter",
}

__all__ = [
    "CATALOG", "ActionRefused", "ActionResult", "AuditSink", "CapturedState", "CommandRecord",
    "Outcome", "RemediationOptions", "Verification", "chain_resumes", "cli_incident_id",
    "execute", "offers", "options_from_extra", "plan", "revert", "revert_result",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'bot.remediation' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
