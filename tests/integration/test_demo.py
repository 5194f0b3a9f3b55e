"""The README's first command: the demo tells the whole story, its numbers agree with each
other (with --yes and with a person typing), and it leaves nothing running nor on disk."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.demo import demo_env, disagreements, flat, read, run_typed, run_yes


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


def leftover_needles(tmpdir: Path, out: str) -> tuple[str, ...]:
    """What only this demo's own processes carry on their command line: its sshd's config
    under its TMPDIR, and its worker's private Redis URL (other tests, and other runs on the
    same machine, have sshds and workers of their own)."""
    port = re.search(r"Redis on 127\.0\.0\.1:(\d+)", out)
    assert port is not None, out[:2000]
    return (f"sshd -D -e -f {tmpdir}", f"--url redis://127.0.0.1:{port[1]}/")


def leftovers(tmpdir: Path) -> list[str]:
    """What the demo left in its temporary directory (it made everything there)."""
    return sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*"))


@pytest.mark.timeout(180)
def test_demo_yes_runs_the_story_end_to_end(tmp_path: Path) -> None:
    env = demo_env(tmp_path)
    rc, out = run_yes(env)
    assert rc == 0, out[-4000:]
    assert out.startswith("Starting the demo's world")  # a line before anything is loaded
    words = flat(out)  # panels wrap: read the words
    assert "You are not allowed to approve" in words  # the intruder's click was refused
    assert "stopped and disabled vllm-kimi-k25-int4.service; 8/8 GPUs free" in words
    assert "1 partial file removed, 1 corrupt file recomputed" in words
    assert "output complete: 200/200 sample files, 200 load" in words
    assert disagreements(out) == []
    assert read(out).waited is None  # --yes: nobody waited
    # the terminal says the chat's words with plain symbols: no :emoji: code, no <!subteam^…>
    assert re.findall(r":[a-z][a-z0-9_+-]*:", out) == [] and "<!subteam" not in out
    assert "\x1b[" not in out  # NO_COLOR, and not a terminal
    assert "nothing left running" in words
    assert processes_matching(leftover_needles(tmp_path, out)) == set()
    assert leftovers(tmp_path) == []


@pytest.mark.timeout(180)
def test_demo_with_a_person_typing_counts_no_thinking_time(tmp_path: Path) -> None:
    rc, out = run_typed(demo_env(tmp_path), think_s=2.5)
    assert rc == 0, out[-4000:]
    assert disagreements(out) == []
    got = read(out)
    assert got.waited is not None and got.waited >= 2.5  # said, and not in a step
    approval = next(s for label, s in got.timings if label.startswith("approval"))
    assert got.approved_at is not None and got.resumed_state_at is not None
    assert approval < got.resumed_state_at - got.approved_at + 0.6
    assert "nothing left running" in flat(out) and leftovers(tmp_path) == []
    assert processes_matching(leftover_needles(tmp_path, out)) == set()


def test_demo_without_a_terminal_asks_for_yes() -> None:
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "demo"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "incident-bot demo --yes" in proc.stderr
