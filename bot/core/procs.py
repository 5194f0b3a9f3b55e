"""Stopping the child processes we start (redis-server, sshd, alertmanager, workers)."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_child(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; always reaped, never by name."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_s)
