"""``systemctl daemon-reload`` on a sim host: read each unit's drop-ins from the disk.

The files are real, in the host's sandbox root (``bot.sim.sandbox``), so a drop-in
written over SSH is what ``systemctl show`` reflects after the reload, and removing it
puts the unit's own values back. Only the keys the bot writes are understood.
"""

from __future__ import annotations

import glob
import os

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import SimCall


DIR = "/etc/systemd/system/{name}.d"
KEYS = {"Restart": "restart", "TimeoutStopSec": "timeout_stop_sec",
        "ExecStartPre": "exec_start_pre"}


def _seconds(text: str) -> float:
    text = text.strip()
    for suffix, factor in (("min", 60.0), ("ms", 0.001), ("s", 1.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def parse_dropin(text: str) -> dict[str, Any]:
    """``[Service]`` keys of one drop-in file (the bot's subset)."""
    out: dict[str, Any] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        key, sep, value = line.partition("=")
        if section == "[Service]" and sep and key in KEYS:
            out[KEYS[key]] = _seconds(value) if key == "TimeoutStopSec" else value.strip()
    return out


def reload_unit(unit: dict[str, Any]) -> None:
    base = unit.setdefault("base", {"restart": unit["restart"],
                                    "timeout_stop_sec": unit.get("timeout_stop_sec", 90.0),
                                    "exec_start_pre": unit.get("exec_start_pre", "")})
    values = dict(base)
    paths = sorted(glob.glob(os.path.join(DIR.format(name=unit["name"]), "*.conf")))
    for path in paths:
        try:
            with open(path, encoding="utf-8") as fh:
                values.update(parse_dropin(fh.read()))
        except OSError:
            continue
    unit.update(values, drop_in_paths=paths)


def daemon_reload(ctx: SimCall) -> int:
    with ctx.mutate() as state:
        for unit in state["units"].values():
            reload_unit(unit)
    return 0
