"""The CUDA smoke script the health gate's third level sends to a GPU host (its text, read
by ``playbooks.health_gate``; the bot never imports it: it needs torch)."""

from __future__ import annotations

from pathlib import Path

SCRIPT = Path(__file__).with_name("gpu_smoke.py")
MARKER = "--incident-bot-smoke"  # first argument: names the run in the host's process list


def script_text() -> str:
    return SCRIPT.read_text()
