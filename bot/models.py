"""The data every part exchanges: probe results, findings, proposed actions, diagnoses.

Plain frozen dataclasses so parsers and rules stay pure; ``to_dict`` gives DESIGN's
``diagnose --json`` shape.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class DiagnosisStatus(StrEnum):
    OK = "ok"
    PARTIAL = "partial"  # some probes failed or timed out
    UNREACHABLE = "unreachable"  # no SSH session (connect, auth or host key)


@dataclass(frozen=True)
class ProbeResult:
    """One command run on a host."""

    name: str
    command: str
    exit_status: int | None
    duration_s: float
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    error: str | None = None  # transport error (channel refused, ...), not a nonzero exit

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out and self.error is None

    def summary(self) -> dict[str, Any]:
        """The JSON contract's probe entry (outputs are evidence, not repeated here)."""
        return {
            "name": self.name,
            "command": self.command,
            "exit_status": self.exit_status,
            "duration_s": round(self.duration_s, 3),
            "timed_out": self.timed_out,
        }


@dataclass(frozen=True)
class Finding:
    code: str  # dotted, stable: "gpu.idle_vram_held", "ssh.unreachable", ...
    severity: Severity
    title: str
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ProposedAction:
    """A catalog action with validated parameters; never a free-form command."""

    id: str
    kind: str  # "systemd.stop_disable", "systemd.mask", "process.terminate", ...
    params: dict[str, str]
    reason: str
    risk: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    host: str
    playbook: str
    status: DiagnosisStatus
    duration_s: float
    findings: tuple[Finding, ...] = ()
    actions: tuple[ProposedAction, ...] = ()
    probes: tuple[ProbeResult, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "playbook": self.playbook,
            "status": self.status.value,
            "duration_s": round(self.duration_s, 3),
            "findings": [f.to_dict() for f in self.findings],
            "actions": [a.to_dict() for a in self.actions],
            "probes": [p.summary() for p in self.probes],
        }
