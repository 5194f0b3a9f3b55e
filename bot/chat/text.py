"""Text conventions for ``ChatMessage``: Slack mrkdwn, with untrusted text escaped.

Message text is mrkdwn-ish (``*bold*``, ``<@U123>`` mentions). Anything that came from a
host, an alert or a person (process names, unit names, deny reasons) goes through
``escape`` so it can never ping a channel (``<!channel>``), forge a link or break out
of a code block. The terminal backend turns the same text back into plain text.

Whatever a message carries, it is shown with ``visible`` (``bot.core.visible``) at the
backend's edge (every Slack payload, ephemeral, modal, Home tab and slash answer; every
terminal line): bidi, control and zero-width characters are written out as ``\\u202e``.
"""

from __future__ import annotations

import re

from bot.core import fmt
from bot.core.mrkdwn import escape as escape
from bot.core.mrkdwn import mention as mention
from bot.core.visible import visible as visible
from bot.core.visible import visible_payload as visible_payload

MENTION_RE = re.compile(r"<@([UW][A-Z0-9]{1,20})>")
LINK_RE = re.compile(r"<(https?://[^|>\s]+)\|([^>]*)>")
FENCE = "```"
FENCE_BREAK = "`\u2009`\u2009`"  # thin spaces: visible, and no longer a fence


def code_safe(text: object) -> str:
    """Escaped, and a stray triple backtick cannot close our code fence."""
    return escape(text).replace(FENCE, FENCE_BREAK)


def inline_code(text: object) -> str:
    """A value shown as ``code``; backticks in it are replaced so the span stays closed."""
    return "`" + escape(text).replace("`", "'") + "`"


def mentions(users: tuple[str, ...] | list[str]) -> str:
    return ", ".join(mention(u) for u in users) if users else "nobody"


def to_plain(text: str) -> str:
    """mrkdwn → terminal text: mentions as @U…, links as label (url), entities unescaped."""
    text = MENTION_RE.sub(r"@\1", text)
    text = LINK_RE.sub(r"\2 (\1)", text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return visible(text)


def clip(text: str, limit: int, marker: str = "…") -> str:
    """At most ``limit`` characters; a cut is marked so nobody mistakes it for the whole."""
    if len(text) <= limit:
        return text
    if limit <= len(marker):
        return text[:limit]
    return text[: limit - len(marker)] + marker


_MIB = re.compile(r"\b(\d+(?:\.\d+)?) MiB\b")


def in_gib(text: str) -> str:
    """Host-side result text in chat units: ``max 40000 MiB`` → ``max 39.1 GiB``."""
    return _MIB.sub(lambda m: fmt.gib(float(m[1])), text)
