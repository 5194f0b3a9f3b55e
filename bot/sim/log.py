"""The host's command log (``commands.jsonl``): one JSON object per line, appended with a
single O_APPEND write so concurrent sessions never interleave. Stdlib only (hot path).
"""

from __future__ import annotations

import json
import os
from typing import Any

LOG_FILE = "commands.jsonl"


def append_log(workdir: str | os.PathLike[str], entry: dict[str, Any]) -> None:
    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode()
    fd = os.open(os.path.join(workdir, LOG_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_log(workdir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    try:
        with open(os.path.join(workdir, LOG_FILE), encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []
