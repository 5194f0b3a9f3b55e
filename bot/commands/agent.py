"""`incident-bot agent`: the host agent (``bot/agent/config.py`` defines its options).

The agent module imports nothing heavy; on a host, prefer ``python -m bot.agent`` (the
systemd unit does) so the CLI's other commands are never imported next to the work. Both
run the same typer command, so the help and the exit statuses are the same.
"""

from __future__ import annotations

import typer

from bot.agent.__main__ import run, setup_logging
from bot.agent.config import AgentConfig
from bot.agent.config import register as register_agent


def _run(config: AgentConfig) -> int:
    setup_logging()
    return run(config)


def register(app: typer.Typer) -> None:
    register_agent(app, _run)
