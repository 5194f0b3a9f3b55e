"""What every subcommand shares, so ``incident-bot`` has one help style and one set of
conventions: ``-h``/``--help`` everywhere, ``-c/--config FILE`` on every command that
reads a config, closed sets (playbooks, action kinds, formats) listed as choices, and a
console that prints data as it is (no Rich markup or ``:emoji:`` codes read from a host's
output; ``NO_COLOR`` and a non-terminal mean no colour).

Exit status, for every command: 0 ok, 1 failed (unreachable, not fixed, refused), 2 a
usage or config error (``bot/core/cli_style.py``; ``bot/cli.py`` maps errors to them).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

if TYPE_CHECKING:
    from rich.console import Console

from bot.core.cli_style import (  # noqa: F401 - re-exported: commands import them from here
    CONTEXT_SETTINGS,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STATUS_HELP,
    EXIT_USAGE,
    PLAIN_HELP,
)

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", "-c", metavar="FILE",
    help="YAML config file (secrets and REDIS_URL come from the environment)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON")]


def sub_app(help_text: str) -> typer.Typer:
    """A command group (``sim``, ``extract`` …) in the one help style: plain text, ``-h``."""
    return typer.Typer(help=help_text, no_args_is_help=True, **PLAIN_HELP)


def choices(values: Iterable[str]) -> Any:
    """A ``Literal`` of ``values``: typer shows ``<a|b|c>`` in the help and refuses anything
    else with exit status 2, before the command runs."""
    return Literal.__getitem__(tuple(values))


def action_kinds() -> tuple[str, ...]:
    """The action kinds a person may name (``act KIND``, ``policy check``): the action
    registry's names (``incident_bot.actions``)."""
    from bot.remediation.actions.registry import kinds

    return kinds()


def playbook_names() -> tuple[str, ...]:
    """Every playbook ``diagnose --playbook`` can run, ``auto`` last."""
    from playbooks.registry import names

    return tuple(names())


def alert_kinds() -> tuple[str, ...]:
    """The built-in incident kinds (``vm_restart``, ``vram_idle`` …)."""
    from bot.domain.kinds import BUILTIN_KINDS

    return tuple(sorted(BUILTIN_KINDS))


def console(*, stderr: bool = False) -> Console:
    """A Rich console for tables and our own styling. Data must still go through
    ``plain``: ``emoji=False`` keeps ``0000:ab:00`` from becoming an emoji, and Rich itself
    drops colour for ``NO_COLOR`` and when the output is not a terminal."""
    from rich.console import Console

    return Console(stderr=stderr, emoji=False, highlight=False)


def plain(text: object) -> str:
    """Text from a host, a config or a person, safe inside Rich markup: shown as it is."""
    from rich.markup import escape

    return escape(str(text))
