"""The README's first command: the demo tells the whole story and leaves nothing running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


def processes_matching(needles: tuple[str, ...]) -> set[int]:
    """PIDs whose command line contains one of ``needles`` (read from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and any(n in cmdline for n in needles):
            found.add(int(entry.name))
    return found


LEFTOVERS = ("sshd -D -e -f /tmp/incident-bot-demo", "bot.cli worker --host gpu-01")


@pytest.mark.timeout(180)
def test_demo_yes_runs_the_story_end_to_end() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["COLUMNS"] = "300"  # rich wraps at 80 columns without a terminal
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "demo", "--yes"], env=env,
                          capture_output=True, text=True, timeout=170)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:] + out[-2000:]
    assert "You are not allowed to approve" in out  # the intruder's click was refused
    assert "stopped and disabled vllm-kimi-k25-int4.service; 8/8 GPUs free" in out
    assert "1 partial file removed, 1 corrupt file recomputed" in out
    assert "output complete: 200/200 sample files, 200 load" in out
    assert "step timings" in out and "nothing left running" in out
    # the terminal says the chat's words with plain symbols: no :emoji: code, no <!subteam^…>
    assert re.findall(r":[a-z][a-z0-9_+-]*:", out) == [] and "<!subteam" not in out
    assert processes_matching(LEFTOVERS) == set()


def test_demo_without_a_terminal_asks_for_yes() -> None:
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "demo"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "incident-bot demo --yes" in proc.stderr
