"""The CLI lists DESIGN's subcommands, each with --help."""

from __future__ import annotations

import subprocess
import sys

import pytest

SUBCOMMANDS = ["demo", "serve", "diagnose", "act", "incidents", "audit", "silence", "worker",
               "agent", "sim", "extract", "digest"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, timeout=120)


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


def test_unknown_option_is_a_usage_error_not_a_crash() -> None:
    proc = run("incidents", "--bogus")
    assert proc.returncode == 2
    assert "No such option" in proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
