"""The CLI lists DESIGN's subcommands, each with --help."""

from __future__ import annotations

import subprocess
import sys

import pytest

SUBCOMMANDS = ["demo", "serve", "diagnose", "act", "incidents", "worker", "agent", "sim", "extract"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_subcommand() -> None:
    proc = run("--help")
    assert proc.returncode == 0
    for name in SUBCOMMANDS:
        assert name in proc.stdout


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name: str) -> None:
    proc = run(name, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout
