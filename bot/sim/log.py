"""The host's command log (``commands.jsonl``): one JSON object per line, appended with a
single O_APPEND write so concurrent sessions never interleave. Every sim command writes
one, so the line is encoded here, byte for byte as ``json.dumps(entry, ensure_ascii=False)``
would, without importing ``json`` (and ``re``, ~20 ms a command); reading uses ``json``.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

LOG_FILE = "commands.jsonl"


# what json's encoder escapes in a string: quote, backslash and the C0 controls
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)} | {
    ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r",
    ord("\t"): "\\t", ord("\b"): "\\b", ord("\f"): "\\f"}


def to_json(value: Any) -> str:
    """JSON text of None, bools, numbers, strings, lists and str-keyed dicts."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, str):
        return '"' + value.translate(_ESCAPES) + '"'
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(to_json, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{to_json(str(k))}: {to_json(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def append_log(workdir: str | os.PathLike[str], entry: dict[str, Any]) -> None:
    line = (to_json(entry) + "\n").encode()
    fd = os.open(os.path.join(workdir, LOG_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_log(workdir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    import json

    try:
        with open(os.path.join(workdir, LOG_FILE), encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
