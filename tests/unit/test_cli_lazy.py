"""The CLI's lazy table: it names exactly the registered commands, with their own help,
and ``--help`` imports none of the heavy libraries behind them."""

from __future__ import annotations

import importlib
import subprocess
import sys

import typer

from bot import cli

HEAVY = ("redis", "pydantic", "pydantic_settings", "httpx", "prometheus_client", "paramiko",
         "torch", "rich", "starlette", "bot.config", "playbooks", "storage")


def test_table_names_exactly_what_the_modules_register() -> None:
    everything = typer.Typer()
    for module in cli.COMMAND_MODULES:
        importlib.import_module(f"bot.commands.{module}").register(everything)
    registered = set(typer.main.get_group(everything).commands)
    assert registered == set(cli.COMMANDS)


def test_each_line_is_the_commands_own_help() -> None:
    for name, (_, line) in cli.COMMANDS.items():
        command = cli.load_command(name)
        assert command.get_short_help_str(limit=1000) == line, name


def test_help_imports_nothing_heavy() -> None:
    code = ("import sys; from bot.cli import main; rc = main(['--help']); print(sorted("
            "{m if m.startswith('bot.') else m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    loaded = out.strip().splitlines()[-1]
    assert "Commands:" in out and "diagnose" in out
    for name in HEAVY:
        assert f"'{name}" not in loaded, f"{name} imported by --help: {loaded}"
