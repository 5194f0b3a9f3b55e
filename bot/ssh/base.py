"""The SSH side-effect interface. Playbooks and remediation take an ``SSHRunner``.

Implementations: ``bot.ssh.pool.ParamikoPool`` (real hosts and sim hosts over sshd).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.domain.findings import ProbeResult

_TARGET = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<host>[^:\s@]+)(?::(?P<port>\d{1,5}))?$")


# a command's error when it never reached the host (no channel could be opened for it)
# (refused, no slot, no answer: a frozen host)
NOT_SENT_ERRORS = ("the server refused every channel (MaxSessions?)",
                   "no free SSH session slot before the deadline",
                   "no answer from the host: timed out opening a session")


class SSHError(Exception):
    """Base for transport failures; ``kind`` feeds metrics and findings."""

    kind = "ssh"


class HostUnreachable(SSHError):
    kind = "unreachable"


class HostKeyMismatch(SSHError):
    """Unknown or changed host key: never auto-added."""

    kind = "host_key"


class AuthFailed(SSHError):
    kind = "auth"


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to reach one host. ``name`` is the inventory name shown to people."""

    name: str
    host: str
    port: int = 22
    user: str = "root"
    key_path: str | None = None
    known_hosts: str | None = None
    sudo: bool = False  # actions' commands say ``sudo -n`` (non-root user); probes never do

    @classmethod
    def parse(cls, spec: str, *, name: str | None = None, key_path: str | None = None,
              known_hosts: str | None = None, sudo: bool = False) -> SSHTarget:
        """``user@host:port`` (user and port optional)."""
        m = _TARGET.match(spec)
        if not m:
            raise ValueError(f"not a target: {spec!r} (expected user@host:port)")
        port = int(m["port"] or 22)
        if not 0 < port < 65536:
            raise ValueError(f"port out of range in {spec!r}")
        return cls(name=name or m["host"], host=m["host"], port=port, user=m["user"] or "root",
                   key_path=key_path, known_hosts=known_hosts, sudo=sudo)

    @property
    def address(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True)
class Command:
    """A probe or action step: a stable name and an already-quoted shell command."""

    name: str
    argv_text: str
    timeout_s: float


class SSHRunner(Protocol):
    def run(self, target: SSHTarget, command: Command) -> ProbeResult:
        """Run one command; transport failures raise ``SSHError``; deadlines give timed_out."""
        ...

    def run_many(self, target: SSHTarget, commands: Sequence[Command]) -> list[ProbeResult]:
        """Run commands in parallel channels on one connection, results in input order."""
        ...

    def close(self) -> None: ...
