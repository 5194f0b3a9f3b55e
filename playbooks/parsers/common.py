"""Small tolerant number readers shared by the parsers."""

from __future__ import annotations

import re

_NUM = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%]*)\s*$")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTPE]?)(?:i?B)?\s*$", re.IGNORECASE)
_POW = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
MISSING = ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[GPU requires reset]",
           "[Insufficient Permissions]", "-", "")


def number(text: str) -> float | None:
    """``'75800 MiB'``, ``'0 %'``, ``'12.5'`` -> the number; markers like ``[N/A]`` -> None."""
    t = text.strip()
    if t in MISSING or t.startswith("["):
        return None
    m = _NUM.match(t)
    if not m:
        return None
    try:
        return float(m[1])
    except ValueError:  # pragma: no cover - the regex only admits floats
        return None


def integer(text: str) -> int | None:
    value = number(text)
    return int(value) if value is not None else None


def size_bytes(text: str) -> int | None:
    """``'3.9G'``, ``'512M'``, ``'1.2 GiB'``, ``'4096'`` (binary units) -> bytes."""
    m = _SIZE.match(text)
    if not m:
        return None
    return int(float(m[1]) * 1024 ** _POW[m[2].upper()])


def human(n: float | None) -> str:
    """Bytes as people read them: ``75.8 GB`` style with binary steps (like df -h)."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "K", "M", "G", "T", "P"):
        if abs(value) < 1024 or unit == "P":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}P"  # pragma: no cover


def lines(text: str) -> list[str]:
    """Non-empty lines with trailing whitespace removed."""
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()]


def first_line(text: str, limit: int | None = None) -> str:
    """The first line of the output, stripped and cut to ``limit`` characters ("" if none)."""
    stripped = text.strip()
    return stripped.splitlines()[0][:limit] if stripped else ""
