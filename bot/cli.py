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

from bot.core.errors import UserError, log_internal

# typer >= 0.20 vendors click as ``typer._click`` and raises its own exception classes.
CLICK_USAGE: tuple[type[Exception], ...] = (click.ClickException,)
CLICK_EXIT: tuple[type[BaseException], ...] = (click.exceptions.Exit,)
CLICK_ABORT: tuple[type[BaseException], ...] = (click.exceptions.Abort,)
try:
    from typer import exceptions as _te
    from typer._click import exceptions as _tx

    CLICK_USAGE += (_tx.ClickException,)
    CLICK_EXIT += tuple(c for c in (getattr(_te, "Exit", None),) if c is not None)
    CLICK_ABORT += tuple(c for c in (getattr(_te, "Abort", None),) if c is not None)
except ImportError:  # pragma: no cover - older typer raises click's own classes
    pass

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
        rv = command.main(args=argv, prog_name="incident-bot", standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc.message}", err=True)
        return exc.exit_code
    except CLICK_EXIT as exc:
        return int(getattr(exc, "exit_code", 0))
    except CLICK_USAGE as exc:
        exc.show()  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", 2))
    except CLICK_ABORT:
        click.echo("aborted", err=True)
        return 130
    except Exception as exc:
        error_id = log_internal(exc, "cli")
        click.echo(f"error: internal error {error_id}: {type(exc).__name__}: {exc}", err=True)
        return 1
    return rv if isinstance(rv, int) else 0  # without standalone mode typer.Exit(n) returns n


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
