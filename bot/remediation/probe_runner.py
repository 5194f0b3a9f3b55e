"""Remediation's way of running ``playbooks`` probes: one host, its own timeout, no session.

Diagnosis runs probes in a ``playbooks.base.Session`` that keeps every result as
evidence. Remediation reads the same probes at single moments (capture before an
action, re-probe after a timeout, verify after) and must stop when the subject cannot
be read: ``ProbeFailed`` carries the tool's own words. Commands go out without the
pool's ``sudo -n`` wrapper: reads need no root, and an action's own text says ``sudo``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from bot.domain.findings import ProbeResult
from bot.ssh.base import Command, SSHRunner, SSHTarget
from playbooks.base import Probe

T = TypeVar("T")


class ProbeFailed(Exception):
    """A probe that could not answer (timeout, nonzero exit, unparsable)."""

    def __init__(self, probe: ProbeResult, why: str) -> None:
        super().__init__(f"{probe.name}: {why}")
        self.probe = probe

    @property
    def silent(self) -> bool:
        """The host gave no answer at all (timed out, or no channel): not a reading, an
        absence of one (issue 39: a host that stopped answering)."""
        return self.probe.timed_out or (self.probe.exit_status is None
                                        and bool(self.probe.error))


def plain(target: SSHTarget) -> SSHTarget:
    """The same host without the pool's ``sudo -n`` wrapper (reads need no root)."""
    return replace(target, sudo=False) if target.sudo else target


def tool_words(result: ProbeResult) -> str:
    """Why a probe failed, in the tool's own words (its stderr, else the transport's)."""
    return (result.stderr or result.error or f"exit {result.exit_status}").strip()[:200]


def answered(result: ProbeResult) -> ProbeResult:
    """The host answered at all (any exit status): else ``ProbeFailed``."""
    if result.timed_out or result.error:
        raise ProbeFailed(result, "no answer")
    return result


def require_ok(result: ProbeResult) -> ProbeResult:
    """The probe answered with exit 0: else ``ProbeFailed``."""
    if result.timed_out:
        raise ProbeFailed(result, "timed out")
    if result.exit_status != 0 or result.error:
        raise ProbeFailed(result, f"exit {result.exit_status}: "
                                  f"{(result.error or result.stderr)[:200]}")
    return result


def run_probes(runner: SSHRunner, target: SSHTarget, probes: Sequence[Probe[Any]],
               timeout_s: float) -> list[tuple[ProbeResult, Any]]:
    """Several probes at once (parallel channels), each with its result and parsed value;
    nothing is checked: the caller says which failures matter."""
    commands = [Command(p.name, p.command, p.timeout_s or timeout_s) for p in probes]
    results = runner.run_many(plain(target), commands)
    return [(r, p.parse(r.stdout)) for p, r in zip(probes, results, strict=True)]


def run_probe(runner: SSHRunner, target: SSHTarget, probe: Probe[T],
              timeout_s: float) -> tuple[ProbeResult, T]:
    result = runner.run(plain(target), Command(probe.name, probe.command,
                                               probe.timeout_s or timeout_s))
    return result, probe.parse(result.stdout)


def ask(runner: SSHRunner, target: SSHTarget, probe: Probe[T], timeout_s: float) -> T:
    """The probe's parsed answer; ``ProbeFailed`` unless it exited 0."""
    result, value = run_probe(runner, target, probe, timeout_s)
    require_ok(result)
    return value
