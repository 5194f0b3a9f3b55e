"""The two mrkdwn rules every layer that words a message needs: untrusted text escaped,
a person named as a mention.

Pure and tiny, so the flow's decisions (``bot.domain.flow``) can word a reply the same
way the chat layer does (``bot.chat.text`` re-exports both) without importing chat.
"""

from __future__ import annotations

import re

SLACK_ID_RE = re.compile(r"[UW][A-Z0-9]{1,20}")


def escape(text: object) -> str:
    """Slack's three control characters, escaped as Slack documents (``&``, ``<``, ``>``)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mention(user: str) -> str:
    """A user mention for ids that look like Slack ids; anything else is shown escaped."""
    if SLACK_ID_RE.fullmatch(user):
        return f"<@{user}>"
    return escape(user)
