"""The catalog's building blocks: parameters, steps (exact command lines), action specs."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bot.core.errors import UserError
from bot.domain import validate

SUDO = ("sudo", "-n")
PRINTF_LINES = "%s\\n"  # printf's format: each argument on its own line


class ActionRefused(UserError):
    """A kind or parameter that must not reach a host; the reason is shown verbatim."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


def choice(name: str, allowed: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if value not in allowed:
            raise validate.InvalidIdentifier(name, value, f"must be one of {', '.join(allowed)}")
        return str(value)
    return check


def job_id(value: object) -> str:
    """An extraction job id, in the one grammar ``new_job_id`` makes."""
    if not isinstance(value, str) or not validate.valid_job_id(value):
        raise validate.InvalidIdentifier("job", value, "expected ex- and 12 hex digits")
    return value


@dataclass(frozen=True)
class ParamSpec:
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


@dataclass(frozen=True)
class ActionSpec:
    kind: str
    title: str  # past tense for summaries: "stopped and disabled"
    params: tuple[ParamSpec, ...]
    render: Callable[[Mapping[str, str]], tuple[RemoteStep, ...]]
    risk: str
    frees_gpus: bool = False
    revertable: bool = False
    remote: bool = True  # False: acts on the bot's own queue, not over SSH

    def validate(self, params: Mapping[str, object]) -> dict[str, str]:
        """Canonical parameters, or ``ActionRefused`` naming the first bad one."""
        names = {p.name for p in self.params}
        extra = sorted(set(params) - names)
        if extra:
            raise ActionRefused(f"refused {self.kind}: unknown parameter {extra[0]!r} "
                                f"(takes {', '.join(sorted(names))})")
        out: dict[str, str] = {}
        for spec in self.params:
            if spec.name not in params and spec.default is not None:
                out[spec.name] = spec.default
                continue
            if spec.name not in params:
                raise ActionRefused(
                    f"refused {self.kind}: missing parameter {spec.name!r} ({spec.help})")
            try:
                out[spec.name] = spec.check(params[spec.name])
            except validate.InvalidIdentifier as exc:
                raise ActionRefused(f"refused {self.kind}: {exc}") from None
        return out


