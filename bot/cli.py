"""The one entry point, ``incident-bot``. Each subcommand lives in ``bot/commands/``.

``main`` turns a ``UserError`` into one line on stderr and its exit status, and any
other exception into a logged error with an id: no traceback reaches the user.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, cast

from bot import __version__
from bot.core.cli_style import CONTEXT_SETTINGS, EXIT_STATUS_HELP
from bot.core.errors import UserError, log_internal

if TYPE_CHECKING:  # typer is imported when a command is built: ``diagnose`` asked of a
    import typer  # running serve never needs it (``bot.commands.diagnose_client``)
    from typer import _click as click  # typer >= 0.20 builds its commands on this copy

# Every subcommand: name -> (module in bot/commands/ that registers it, its one-line help).
# Modules are imported only when their command runs (or its own --help is asked for), so
# ``incident-bot --help`` and ``incident-bot diagnose`` pay only for what they use.
# tests/unit/test_cli.py checks each line here against the command's own docstring.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "The seed story end to end on a simulated host, terminal chat."),
    "serve": ("serve", "The bot: Slack events, alert webhooks, the incident flow, scheduler, "
              "metrics."),
    "diagnose": ("diagnose", "Run a diagnostic playbook on TARGET over SSH."),
    "act": ("act", "Run one catalog action on TARGET with capture, verify and audit."),
    "incidents": ("incidents", "List open incidents (--all: resolved too)."),
    "audit": ("incidents", "Print one incident's timeline: who did what, when, with the "
              "evidence hash."),
    "worker": ("worker", "Run an RQ extraction worker for one host's queue."),
    "agent": ("agent", "Host agent: NVML, boot id and disk checks, posted to the bot's /alerts."),
    "silence": ("incidents", "Silence alerts per host and kind ('*' for any)."),
    "sim": ("sim", "Simulated GPU hosts over a real OpenSSH sshd."),
    "extract": ("extract", "Resumable hidden-state extraction jobs."),
    "digest": ("digest", "Health digests: GPU memory and utilisation, disks, incidents."),
    "postmortem": ("postmortem", "Print an incident's postmortem timeline as Markdown (or JSON)."),
    "policy": ("policy", "What the fleet policies would do: check, replay, breaker."),
    "config": ("config", "Check a config file: everything serve validates, one line per "
               "problem."),
    "extensions": ("extensions", "Operator extensions (YAML probes, findings, actions): check "
                   "and test."),
}
COMMAND_MODULES = tuple(dict.fromkeys(module for module, _ in COMMANDS.values()))
_LISTING = "incident_bot.listing"


def load_command(name: str) -> click.Command:
    """Import the module that registers ``name`` and build its click command."""
    import typer

    module = importlib.import_module(f"bot.commands.{COMMANDS[name][0]}")
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                         rich_markup_mode=None, context_settings=CONTEXT_SETTINGS)
    module.register(holder)
    command = typer.main.get_group(holder).commands[name]
    return cast("click.Command", command)


@functools.cache
def build_app() -> typer.Typer:
    """The top-level typer app; its group lists commands from ``COMMANDS`` and imports one
    when it runs. Built on first use: importing typer (and the pydantic its parameters
    are coerced with) is most of a short command's start-up."""
    import typer
    from typer.core import TyperCommand, TyperGroup

    class LazyGroup(TyperGroup):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return list(COMMANDS)

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            if cmd_name not in COMMANDS:
                return None
            if ctx.meta.get(_LISTING):  # the group's own --help needs names and one line
                line = COMMANDS[cmd_name][1]
                return TyperCommand(cmd_name, help=line, short_help=line)
            return load_command(cmd_name)

        def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            ctx.meta[_LISTING] = True
            try:
                super().format_help(ctx, formatter)
            finally:
                ctx.meta.pop(_LISTING, None)

    app = typer.Typer(
        name="incident-bot",
        cls=LazyGroup,
        help="Incident response for GPU hosts: alerts in, diagnosis over SSH, approvals in chat.",
        epilog=EXIT_STATUS_HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # plain help everywhere (rich's Markdown import: 0.25 s)
        context_settings=CONTEXT_SETTINGS,
    )

    def show_version(value: bool) -> None:
        if value:
            typer.echo(f"incident-bot {__version__}")
            raise typer.Exit(0)

    # the option as a default, not in ``Annotated``: annotations are strings here, read
    # against this module's globals, where typer is not (it is imported on first use)
    @app.callback()
    def _root(version: bool = typer.Option(
            False, "--version", is_eager=True, callback=show_version,
            help="Print the version and exit.")) -> None:
        """Incident response for GPU hosts: alerts in, diagnosis over SSH, approvals in chat."""

    return app


def __getattr__(name: str) -> Any:
    """``bot.cli.app`` (what tests and tools import), built on first use."""
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=os.environ.get("INCIDENT_BOT_LOG_LEVEL", "WARNING"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        if args[:1] == ["diagnose"]:  # asked of a running serve: nothing else to load
            from bot.commands.diagnose_client import fast_main

            answered = fast_main(args[1:])
            if answered is not None:
                return answered
        import typer

        rv = typer.main.get_command(build_app()).main(args=args, prog_name="incident-bot",
                                                      standalone_mode=False)
    except UserError as exc:
        if not getattr(exc, "shown", False):  # a config's problems: one line each
            for line in exc.message.splitlines() or [""]:
                print(f"error: {line}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:
        return _failed(exc)
    return rv if isinstance(rv, int) else 0  # without standalone mode typer.Exit(n) returns n


def _click_classes() -> tuple[tuple[type[BaseException], ...], ...]:
    """(usage, exit, abort) exception classes: click's and, for typer >= 0.20, the ones
    typer raises from its vendored copy (``typer._click``). Imported only on this path."""
    import click

    usage: tuple[type[BaseException], ...] = (click.ClickException,)
    exits: tuple[type[BaseException], ...] = (click.exceptions.Exit,)
    aborts: tuple[type[BaseException], ...] = (click.exceptions.Abort,)
    try:
        from typer import exceptions as _te
        from typer._click import exceptions as _tx

        usage += (_tx.ClickException,)
        exits += tuple(c for c in (getattr(_te, "Exit", None),) if c is not None)
        aborts += tuple(c for c in (getattr(_te, "Abort", None),) if c is not None)
    except ImportError:  # pragma: no cover - older typer raises click's own classes
        pass
    return usage, exits, aborts


def _failed(exc: Exception) -> int:
    """Exit status for anything but a ``UserError``: usage errors shown, the rest logged."""
    usage, exits, aborts = _click_classes()
    if isinstance(exc, exits):
        return int(getattr(exc, "exit_code", 0))
    if isinstance(exc, usage):
        exc.show()  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", 2))
    if isinstance(exc, aborts):
        print("aborted", file=sys.stderr)
        return 130
    error_id = log_internal(exc, "cli")
    print(f"error: internal error {error_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return 1


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
