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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        """Rebuild a stored diagnosis (incident meta) so any replica can re-render it."""
        return cls(
            host=str(data["host"]), playbook=str(data["playbook"]),
            status=DiagnosisStatus(data["status"]), duration_s=float(data["duration_s"]),
            findings=tuple(Finding(code=f["code"], severity=Severity(f["severity"]),
                                   title=f["title"], detail=f.get("detail", ""),
                                   evidence=dict(f.get("evidence") or {}))
                           for f in data.get("findings", ())),
            actions=tuple(ProposedAction(id=a["id"], kind=a["kind"], params=dict(a["params"]),
                                         reason=a.get("reason", ""), risk=a.get("risk", ""))
                          for a in data.get("actions", ())),
            probes=tuple(ProbeResult(name=p["name"], command=p["command"],
                                     exit_status=p.get("exit_status"),
                                     duration_s=float(p.get("duration_s", 0.0)),
                                     timed_out=bool(p.get("timed_out", False)))
                         for p in data.get("probes", ())),
        )
