"""Register a checked set of extensions beside the built-in ones: each ``ext.*`` action
(and its revert) as an ``Action`` in the action registry, the findings in the diagnosis
(``playbooks/extension.py``). Called once at start by the composition root (``serve``,
and the CLI commands that read a config); installing again replaces what was installed.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.errors import ConfigProblems
from bot.domain.extension import Extensions
from bot.extensions.loader import load
from bot.remediation.actions import registry
from bot.remediation.actions.operator import action_classes
from playbooks import extension


def install(extensions: Extensions) -> None:
    registry.register([cls for d in extensions.actions.values() for cls in action_classes(d)])
    extension.install(extensions)


def load_and_install(dirs: Sequence[str], where: str = "config") -> Extensions:
    """Load, check and install; ``ConfigProblems`` (exit status 2, one line per problem
    naming the file, the key and the reason) when anything is wrong: nothing is installed."""
    extensions, problems = load(dirs, where)
    if problems:
        raise ConfigProblems([p.line() for p in problems])
    install(extensions)
    return extensions
