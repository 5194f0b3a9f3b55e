"""One CLI: every command and subcommand answers -h in the one plain style, every command
that reads a config takes -c, --version works, exit statuses are 0 ok / 1 failed / 2 usage
or config, host data is printed as it is (no Rich markup, no :emoji: codes), and NO_COLOR
and a non-terminal mean no colour."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import bot
from bot import cli
from bot.sim.sshd import SimHost

ROOT = Path(__file__).resolve().parents[2]
COLOUR = re.compile(r"\x1b\[[0-9;]*(?:3[0-7]|9[0-7]|38;[0-9;]+)m")


def walk() -> Iterator[tuple[list[str], Any]]:
    """Every command's path and click command, groups and their subcommands included."""
    for name in cli.COMMANDS:
        command = cli.load_command(name)
        yield [name], command
        for sub, child in getattr(command, "commands", {}).items():
            yield [name, sub], child


PATHS = [path for path, _ in walk()]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) for p in PATHS])
def test_every_command_answers_dash_h_in_the_one_style(path: list[str]) -> None:
    rc = cli.main([*path, "-h"])
    assert rc == 0


def test_the_help_is_plain_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    for path in [[], *PATHS]:
        assert cli.main([*path, "-h"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"Usage: incident-bot {' '.join(path)}".rstrip()), path
        assert not set("╭╮╰╯│") & set(out), f"Rich boxes in {path}"
        assert "<bool>" not in out and "-h, --help" in out, path


def test_every_option_named_config_is_dash_c_and_a_file() -> None:
    readers = []
    for path, command in walk():
        for param in command.params:
            if param.name == "config":
                assert set(param.opts) | set(param.secondary_opts) >= {"-c", "--config"}, path
                readers.append(" ".join(path))
    assert {"serve", "diagnose", "act", "incidents", "audit", "worker", "postmortem",
            "digest now", "extract status", "policy check", "silence add"} <= set(readers)


def test_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"incident-bot {bot.__version__}" == \
        f"incident-bot {version('incident-bot')}"


def test_exit_statuses_are_0_1_2(tmp_path: Path) -> None:
    assert run("sim", "scenarios").returncode == 0
    unreachable = run("diagnose", "root@127.0.0.1:1", "--playbook", "vram_idle")
    assert unreachable.returncode == 1
    assert unreachable.stderr.count("error:") == 1 and unreachable.stdout == ""  # said once
    assert "--ssh-key FILE" in unreachable.stderr  # and what to pass
    assert run("diagnose", "x", "--playbook", "nope").returncode == 2  # not a choice
    assert run("act", "x", "no.such_kind").returncode == 2
    assert run("postmortem", "INC-1", "--format", "pdf").returncode == 2
    assert run("incidents", "--bogus").returncode == 2
    bad = tmp_path / "c.yaml"
    bad.write_text("http: {port: seventy}\n")
    assert run("config", "check", str(bad)).returncode == 2
    for proc in (run("incidents", "--bogus"), run("config", "check", str(bad))):
        assert "Traceback" not in proc.stderr


def diagnose_args(host: SimHost) -> list[str]:
    return ["diagnose", host.target, "--ssh-key", str(host.key_path), "--known-hosts",
            str(host.known_hosts_path), "--playbook", "vram_idle"]


def on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ROOT)
        os.execvpe(sys.executable, [sys.executable, "-m", "bot.cli", *argv], env)
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    os.close(fd)
    return out.decode(errors="replace")


def test_host_data_is_printed_as_it_is_and_colour_follows_the_terminal(
        seed_sim: SimHost) -> None:
    piped = run(*diagnose_args(seed_sim), env={"COLUMNS": "200"})
    assert piped.returncode == 0, piped.stderr
    assert "0000:ab:00" in piped.stdout and "🆎" not in piped.stdout  # a PCI bus id, not :ab:
    assert "\x1b[" not in piped.stdout  # not a terminal: no escape codes at all
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    coloured = on_a_terminal(diagnose_args(seed_sim), env)
    assert COLOUR.search(coloured), "a terminal gets colour"
    plain = on_a_terminal(diagnose_args(seed_sim), {**env, "NO_COLOR": "1"})
    assert "0000:ab:00" in plain and not COLOUR.search(plain)
