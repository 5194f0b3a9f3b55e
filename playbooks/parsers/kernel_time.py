"""When a kernel log line was written, as epoch seconds, so "since the repair" can be told.

``journalctl -k -o short-unix`` prints ``1733412345.123456 host kernel: …`` (exact); ``dmesg``
prints ``[  812.331245] …`` (seconds since boot: the boot's epoch makes it absolute). Any
other prefix (``journalctl``'s default ``Mon DD HH:MM:SS`` has neither year nor zone) is
unknown, and an unknown time counts as new: a gate never passes on a guess.
"""

from __future__ import annotations

import re

_UNIX = re.compile(r"^(?P<epoch>\d{9,11}\.\d+)\s")
_UPTIME = re.compile(r"^\[\s*(?P<secs>\d+\.\d+)\]")


def line_epoch(line: str, boot_epoch: float | None) -> float | None:
    text = line.strip()
    m = _UNIX.match(text)
    if m:
        return float(m["epoch"])
    m = _UPTIME.match(text)
    if m and boot_epoch is not None:
        return boot_epoch + float(m["secs"])
    return None
