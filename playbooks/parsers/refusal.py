"""A tool that was not allowed to run, or is not there, in its own words. Pure.

A refused read is not an empty answer: ``dmesg`` that may not read the kernel buffer
has not seen "no Xid"; ``nvidia-smi`` without NVML permissions has not seen "no GPUs";
a ``sudo -n`` the host's sudoers refuse ran nothing. Each wording below is one a real
tool prints (``tests/fixtures/real/``: ``sudo_n_password_required.txt``,
``dmesg_not_permitted.txt``, ``smi_nvml_insufficient_permissions.txt``,
``smi_not_found_dash.txt``, ``smi_command_not_found_bash.txt``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from playbooks.parsers.common import lines


class RefusalKind(StrEnum):
    SUDO = "sudo"  # the sudoers refuse the command (or ask for a password: -n says so)
    PERMISSION = "permission"  # the OS or the library refuses the login's user
    MISSING = "missing"  # the tool is not installed (or not on PATH)


@dataclass(frozen=True)
class ToolRefusal:
    kind: RefusalKind
    quote: str  # the tool's own line


_PATTERNS: tuple[tuple[RefusalKind, re.Pattern[str]], ...] = (
    (RefusalKind.SUDO, re.compile(r"^sudo: (?:a password is required|a terminal is required|"
                                  r"sorry, you must have a tty)", re.I)),
    (RefusalKind.SUDO, re.compile(r"is not allowed to execute .* as \S+ on |"
                                  r"is not in the sudoers file", re.I)),
    (RefusalKind.PERMISSION, re.compile(r"Insufficient Permissions|Operation not permitted|"
                                        r"Permission denied|must be privileged|"
                                        r"due to insufficient permissions", re.I)),
    (RefusalKind.MISSING, re.compile(r"^(?:\S+: )?(?:line \d+: |\d+: )?[\w./-]+: "
                                     r"(?:command )?not found$")),
)


def refusal(text: str) -> ToolRefusal | None:
    """The first line of ``text`` that says the tool was refused or is missing."""
    for line in lines(text):
        quote = line.strip()
        for kind, pattern in _PATTERNS:
            if pattern.search(quote):
                return ToolRefusal(kind, quote)
    return None


def refused(stdout: str, stderr: str, exit_status: int | None) -> ToolRefusal | None:
    """A command's refusal: stderr first (where sudo, the shell and dmesg say it), then
    stdout (where nvidia-smi says it); only for a failed command, or a missing tool
    (exit 127), so a log line that mentions a permission is never read as one."""
    if exit_status in (0, None):
        return None
    return refusal(stderr) or refusal(stdout)
