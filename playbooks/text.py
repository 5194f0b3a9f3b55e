"""Small formatting helpers for finding titles."""

from __future__ import annotations

from bot.core.visible import visible


def plural(n: int) -> str:
    return "" if n == 1 else "s"


def duration(secs: float) -> str:
    """'42 s', '23 min', '5.5 h', '3.5 days'."""
    if secs < 120:
        return f"{secs:.0f} s"
    if secs < 7200:
        return f"{secs / 60:.0f} min"
    if secs < 172800:
        return f"{secs / 3600:.1f} h"
    return f"{secs / 86400:.1f} days"


def printable(text: str, limit: int = 300) -> str:
    """Host text made safe to show on one line, cut short: bidi, control and zero-width
    characters spelled out (``\\u202e``, ``bot.core.visible``), anything else that does
    not print (a newline, an unassigned code point) shown as '?'."""
    clean = "".join(c if c.isprintable() else "?" for c in visible(text))
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"
