"""``python -m bot.agent --url URL [...]``: the lean entry point (see ``config.py``).

The same typer command as ``incident-bot agent``, without the rest of the CLI: on a GPU
host the systemd unit runs this, so nothing but the agent is ever imported next to it.
"""

from __future__ import annotations

import logging
import os
import sys

import typer

from bot.agent.config import AgentConfig, lean_app
from bot.core.errors import UserError


def run(config: AgentConfig) -> int:
    from bot.agent.runner import Agent

    agent = Agent(config)
    return agent.run_once() if config.once else agent.run()


def setup_logging() -> None:
    logging.basicConfig(level=os.environ.get("INCIDENT_BOT_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    """Exit status as ``incident-bot agent``'s: 0 ok, 2 usage or config, else the run's."""
    setup_logging()
    command = typer.main.get_command(lean_app(run))
    try:
        rv = command.main(args=sys.argv[1:] if argv is None else argv,
                          prog_name="python -m bot.agent", standalone_mode=False)
    except UserError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # click's usage errors (typer vendors click: no fixed class)
        show = getattr(exc, "show", None)
        if show is None or not hasattr(exc, "exit_code"):
            raise
        show()
        return int(exc.exit_code)
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
