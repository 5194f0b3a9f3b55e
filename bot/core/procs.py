"""The child processes we start (redis-server, sshd, alertmanager, workers): a free
port to give one, and stopping it."""

from __future__ import annotations

import socket
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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the child binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
