"""nvidia-smi's real error outputs (tests/fixtures/real/smi_*.txt) surface in every
playbook's result in the tool's own words, and never as "no readable GPU rows" (issue 29).

The host is a stand-in runner: every command that runs nvidia-smi answers with the
fixture (exit status 255 where the tool fails as a whole), everything else answers empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from bot.domain.findings import ProbeResult
from bot.domain.headline import choose
from bot.remediation.actions import fixes_of
from bot.ssh.base import Command, SSHTarget
from playbooks import PlaybookOptions, run_playbook

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
FIXTURES = sorted(p.name for p in REAL.glob("smi_*.txt"))
PLAYBOOKS = ("vm_restart", "vram_idle", "disk_full", "triage", "auto")
TARGET = SSHTarget(name="gpu-01", host="127.0.0.1", port=22, user="root", key_path="/dev/null",
                   known_hosts="/dev/null")


class SmiFails:
    """An ``SSHRunner`` whose nvidia-smi says ``text`` and whose other tools say nothing."""

    def __init__(self, text: str) -> None:
        self.text = text

    def run(self, target: SSHTarget, command: Command) -> ProbeResult:
        if "nvidia-smi" in command.argv_text:
            return ProbeResult(command.name, command.argv_text, 255, 0.01, stdout=self.text)
        return ProbeResult(command.name, command.argv_text, 0, 0.01)

    def run_many(self, target: SSHTarget, commands: Sequence[Command]) -> list[ProbeResult]:
        return [self.run(target, c) for c in commands]

    def close(self) -> None:
        pass


def first_line(name: str) -> str:
    return next(ln.strip() for ln in (REAL / name).read_text().splitlines() if ln.strip())


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_the_tools_words_reach_every_playbook(fixture: str, playbook: str) -> None:
    text = (REAL / fixture).read_text()
    d = run_playbook(SmiFails(text), TARGET, playbook,
                     options=PlaybookOptions(samples=1, expected_gpus=8))
    titles = [f.title for f in d.findings]
    said = " ".join(titles)
    words = first_line(fixture)
    if "version mismatch" in words.lower():  # its own finding, with the library's version
        assert any(t.startswith("driver/library mismatch") for t in titles), titles
        head = choose(d, fixes_of).text
        assert head.startswith("driver/library mismatch") and "?" not in head
    else:
        assert words in said, (words, titles)
    assert "no readable GPU rows" not in said
    assert any(f.code == "gpu.verdicts" for f in d.findings)
