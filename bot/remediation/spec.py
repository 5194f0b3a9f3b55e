"""The actions' building blocks: a refusal, a parameter's description, a remote step (the
exact command line, quoted, with its deadline)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.errors import UserError

SUDO = ("sudo", "-n")
PRINTF_LINES = "%s\\n"  # printf's format: each argument on its own line


class ActionRefused(UserError):
    """A kind or parameter that must not reach a host; the reason is shown verbatim."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of an action, as its ``Params`` model declares it."""

    name: str
    check: Callable[[object], str]
    help: str
    default: str | None = None  # optional when set


@dataclass(frozen=True)
class RemoteStep:
    """One remote command of an action, with its own deadline."""

    name: str  # stop | disable | mask | unmask | enable | start | term | kill | vacuum | ...
    argv: tuple[str, ...]
    timeout_s: float
    binary: bool = False  # must run the program, never a shell builtin of the same name
    stdin_lines: tuple[str, ...] = ()  # piped in by an unprivileged printf (a drop-in's text)
    always: bool = False  # runs even after an earlier step failed (restores what it stopped)

    def text(self, sudo: bool) -> str:
        """The exact command line: every argument quoted, ``sudo -n`` for non-root users.

        ``kill`` is also a shell builtin; ``env`` (or sudo, which execs) makes the host
        run the program found on PATH, so what runs does not depend on the login shell.
        File contents come from ``printf`` (run as the login user) so that only the
        allowlisted writer (``tee PATH``) runs as root.
        """
        if sudo:
            cmd = shlex.join((*SUDO, *self.argv))
        else:
            cmd = shlex.join(("env", *self.argv) if self.binary else self.argv)
        if not self.stdin_lines:
            return cmd
        feed = shlex.join(("printf", PRINTF_LINES, *self.stdin_lines))
        return f"{feed} | {cmd} >/dev/null"
