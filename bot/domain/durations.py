"""One duration grammar for every place a person types one: ``90s``, ``30m``, ``2h``,
``1d``, ``1h30m``, ``1.5h``, ``30 min``, ``1w``.

Parsed by ``pytimeparse`` (a maintained, pure parser: no I/O, so the domain may use it),
never by a regular expression of our own. Refused here, for every caller alike: a bare
number (seconds or minutes? a person should say), the clock forms ``10:00`` (ten minutes
or ten hours?), zero and negative lengths. Callers add their own upper bound.
"""

from __future__ import annotations

from pytimeparse import parse as timeparse

EXAMPLES = "30m, 2h or 1d"


class DurationError(ValueError):
    """Not a duration a person meant; the message says what one looks like."""

    def __init__(self, message: str, *, not_positive: bool = False) -> None:
        super().__init__(message)
        self.not_positive = not_positive  # read as a length, but 0 s or less


def parse_duration(text: str) -> float:
    """``30m`` → 1800.0; a ``DurationError`` for anything else (see the module doc)."""
    cleaned = str(text).strip().lower()
    seconds = None if ":" in cleaned else timeparse(cleaned)
    if seconds is None:
        raise DurationError(f"{str(text)[:40]!r} is not a duration: use e.g. {EXAMPLES}")
    if seconds <= 0:
        raise DurationError(f"{str(text)[:40]!r}: a duration must be longer than 0 s",
                            not_positive=True)
    return float(seconds)
