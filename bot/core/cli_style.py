"""The conventions every ``incident-bot`` command follows, in one place below everything
that defines a command (``bot/commands/``, and the host agent, which has its own lean
entry point ``python -m bot.agent``): ``-h`` as well as ``--help``, and the exit status.

Exit status: 0 ok, 1 failed (unreachable, not fixed, refused), 2 a usage or config error.
"""

from __future__ import annotations

from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_STATUS_HELP = "Exit status: 0 ok, 1 failed, 2 usage or config error."
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
PLAIN_HELP: dict[str, Any] = {  # typer.Typer(**PLAIN_HELP): the one help style, no Rich boxes
    "add_completion": False, "pretty_exceptions_enable": False, "rich_markup_mode": None,
    "context_settings": CONTEXT_SETTINGS}
