"""``SlackGroups`` with a second cache level in Redis, shared by every replica (issue 28).

Per-policy approvers make usergroup lookups more frequent; this keeps one
``usergroups.users.list`` per group per TTL for the whole deployment.
"""

from __future__ import annotations

from typing import Any

from bot.chat.slack import SlackGroups
from storage.usergroups import UsergroupCache


class SharedSlackGroups(SlackGroups):
    def __init__(self, client: Any, cache: UsergroupCache, ttl_s: float = 300.0) -> None:
        super().__init__(client, ttl_s)
        self.shared = cache

    def _members(self, group: str) -> frozenset[str]:
        found = self.shared.get(group)
        if found is not None:
            return found
        members = super()._members(group)
        self.shared.put(group, members)
        return members
