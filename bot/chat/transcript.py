"""A command as the transcript shows it: how it ended, in words (pure).

Only commands that ran are shown (a step skipped because its effect already held never
ran); one that got no exit status says why (timed out, the transport's error), never
"exit None".
"""

from __future__ import annotations

from bot.core import strings
from bot.domain.action_result import CommandRecord


def transcript_status(c: CommandRecord) -> str:
    """``exit 0``, ``exit 1 (timed out)``, ``timed out``, ``no answer: channel failed``."""
    if c.exit_status is None:
        if c.timed_out:
            return strings.MSG_CMD_TIMED_OUT
        return strings.MSG_CMD_NO_STATUS.format(why=(c.error or "no exit status")[:200])
    return f"exit {c.exit_status}" + (f" ({strings.MSG_CMD_TIMED_OUT})" if c.timed_out else "")
