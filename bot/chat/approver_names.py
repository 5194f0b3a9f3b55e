"""How a refusal names who may decide, and when: the parts of a private reply that read
the policy rather than the click (shared by approvals and the incident-level verbs)."""

from __future__ import annotations

import time

from bot.chat.text import inline_code, mention
from bot.core import strings
from bot.domain.approval import ApprovalPolicy, is_usergroup


def approver_list(policy: ApprovalPolicy, kind: str) -> str:
    """Users as mentions, usergroups as ids (an ephemeral must not ping a whole group)."""
    entries = sorted(policy.approvers_for(kind))
    if not entries:
        return strings.NO_APPROVERS
    return ", ".join(inline_code(e) if is_usergroup(e) or e == "*" else mention(e) for e in entries)


def utc_minute(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))
