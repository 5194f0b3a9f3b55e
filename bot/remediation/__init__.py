"""Remediation: approved catalog actions that run once, prove they worked, and can be undone.

Public API (the Slack flow, the CLI and the demo call these):
``execute``, ``plan``, ``revert``, ``revert_result``, ``offers``, ``chain_resumes``,
``ActionResult``, ``Outcome``, ``CapturedState``, ``RemediationOptions``, ``AuditSink``,
``ActionRefused``, ``CATALOG``.
"""

from __future__ import annotations

from bot.domain.action_result import ActionResult, CommandRecord, Outcome, Verification
from bot.domain.host_state import CapturedState
from bot.remediation.catalog import CATALOG, ActionRefused, plan
from bot.remediation.execute import AuditSink, cli_incident_id, execute
from bot.remediation.followup import chain_resumes, offers
from bot.remediation.options import RemediationOptions, options_from_extra
from bot.remediation.revert import revert, revert_result

__all__ = [
    "CATALOG", "ActionRefused", "ActionResult", "AuditSink", "CapturedState", "CommandRecord",
    "Outcome", "RemediationOptions", "Verification", "chain_resumes", "cli_incident_id",
    "execute", "offers", "options_from_extra", "plan", "revert", "revert_result",
]
