"""Hidden characters written out, so what a person reads is what a host or an alert said.

Bidi controls (U+202E turns the rest of a line right-to-left: ``gpu-10`` can read
``01-upg``), C0/C1 controls (ESC starts a terminal escape sequence) and zero-width or
invisible characters (two different names that look the same) are shown as ``\\u202e``.
Tab and newline are kept. Used at every edge a person reads: each Slack payload, ephemeral,
modal, Home tab and slash answer, each terminal line, and the host text in findings
(``playbooks.text.printable``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 (but tab and newline), DEL, C1
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e"  # soft hyphen, fillers, ALM, MVS
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f"  # zero-width, LRM/RLM, LS/PS, bidi, invisible
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"  # filler, variation selectors, BOM
    "\U000e0000-\U000e007f]")  # tag characters (ASCII smuggling)


def visible(text: str) -> str:
    """``text`` with every control, bidi and zero-width character written as ``\\uXXXX``
    (``\\U000XXXXX`` past the BMP); tab and newline stay as they are."""
    return _HIDDEN.sub(_spelled, text) if _HIDDEN.search(text) else text


def _spelled(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible_payload(value: Any) -> Any:
    """Every string in a JSON-like payload (blocks, a view) through ``visible``; keys kept."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, Mapping):
        return {k: visible_payload(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [visible_payload(v) for v in value]
    return value
