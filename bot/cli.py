"""The one entry point, ``incident-bot``. Each subcommand lives in ``bot/commands/``.

``main`` turns a ``UserError`` into one line on stderr and its exit status, and any
other exception into a logged error with an id: no traceback reaches the user.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import click
import typer

from bot.errors import UserError, log_internal

app = typer.Typer(
    name="incident-bot",
    help="Incident response for GPU hosts: alerts in, diagnosis over SSH, approvals in chat.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# One module per subcommand (or group); each exposes ``register(app)``.
COMMAND_MODULES = (
    "demo", "serve", "diagnose", "act", "incidents", "worker", "agent", "sim", "extract", "digest",
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"bot.commands.{name}")
        module.register(app)


_register_all()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=os.environ.get("INCIDENT_BOT_LOG_LEVEL", "WARNING"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="incident-bot", standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc.message}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: log with an id, no traceback
        error_id = log_internal(exc, "cli")
        click.echo(f"error: internal error {error_id}: {type(exc).__name__}: {exc}", err=True)
        return 1
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
