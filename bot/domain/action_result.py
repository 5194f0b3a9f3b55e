"""What an action did, as data: outcome, every command run, the evidence of its effect.

An ``ActionResult`` is stored in incident meta and the audit log, so it round-trips
through plain JSON (``to_dict``/``from_dict``); the captured before-state travels with
it so Revert still works after the bot restarts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.core import strings
from bot.domain.findings import ProbeResult
from bot.domain.host_state import CapturedState

EXCERPT_CHARS = 2000


class Seen(StrEnum):
    """What an action's verify observed on the host: the only source of an outcome word.

    ``FIXED``: the host answered and shows the action's effect (past its restart window);
    ``NOT_FIXED``: the host answered and does not show it; ``COULD_NOT_CHECK``: the host
    could not be read (refused connection, timeout, host key changed, a probe that did
    not answer), so nothing is known of the effect. Never inferred from an action that
    raised nothing: each action's verify says which one it saw."""

    FIXED = "fixed"
    NOT_FIXED = "not_fixed"
    COULD_NOT_CHECK = "could_not_check"

    @classmethod
    def of(cls, holds: bool) -> Seen:
        """The host answered; ``holds``: what it showed is the action's effect."""
        return cls.FIXED if holds else cls.NOT_FIXED


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"  # ran, effect verified
    NOOP = "noop"  # effect already held before anything ran
    FAILED = "failed"  # a command failed or the effect did not appear
    RESPAWNED = "respawned"  # stopped, but the same unit came back under a new PID
    STILL_HELD = "still_held"  # stopped, but something else holds the GPUs
    TIMED_OUT = "timed_out"  # a command hit its deadline and the re-probe shows no effect
    TIMED_OUT_BUT_DONE = "timed_out_but_done"  # deadline hit, yet the re-probe shows it worked
    DRY_RUN = "dry_run"  # commands shown, nothing run on the host
    UNREACHABLE = "unreachable"  # no SSH session: nothing ran
    COULD_NOT_CHECK = "could_not_check"  # it ran (or may have), then the host could not be read
    REFUSED = "refused"  # the preflight said no: nothing ran; ``proposals`` says what instead

    @property
    def ok(self) -> bool:
        """Did the host end up in the intended state (or was asked nothing)?"""
        return self in _OK


_OK = frozenset({Outcome.SUCCEEDED, Outcome.NOOP, Outcome.TIMED_OUT_BUT_DONE, Outcome.DRY_RUN})


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """Keep the tail: errors are printed last."""
    return text if len(text) <= limit else "…" + text[-limit:]


@dataclass(frozen=True)
class CommandRecord:
    """One command as it ran (or was skipped), for the audit trail and the thread."""

    name: str
    command: str  # exactly what was sent, sudo prefix included
    exit_status: int | None = None
    duration_s: float = 0.0
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    skipped: str | None = None  # why it did not run ("already inactive")
    reprobe: dict[str, Any] | None = None  # what a re-probe saw after a timeout or failure
    timeout_s: float | None = None  # the deadline it ran under

    @classmethod
    def from_probe(cls, name: str, command: str, probe: ProbeResult,
                   timeout_s: float | None = None) -> CommandRecord:
        return cls(name=name, command=command, exit_status=probe.exit_status,
                   duration_s=round(probe.duration_s, 3), timed_out=probe.timed_out,
                   stdout=excerpt(probe.stdout), stderr=excerpt(probe.stderr), error=probe.error,
                   timeout_s=timeout_s)

    @property
    def ran(self) -> bool:
        return self.skipped is None

    @property
    def ok(self) -> bool:
        return self.skipped is not None or (
            self.exit_status == 0 and not self.timed_out and self.error is None)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommandRecord:
        known: dict[str, Any] = {k: data[k] for k in _RECORD_FIELDS if k in data}
        return cls(**known)


_RECORD_FIELDS = ("name", "command", "exit_status", "duration_s", "timed_out", "stdout",
                  "stderr", "error", "skipped", "reprobe", "timeout_s")


@dataclass(frozen=True)
class Verification:
    """What verify observed (``seen``), and the observations that say so; ``why``: what
    failed when it could not check (in the transport's or the tool's words)."""

    seen: Seen
    detail: str  # "8/8 GPUs free (max 0 MiB)"
    elapsed_s: float = 0.0
    respawned: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    why: str = ""

    @property
    def ok(self) -> bool:
        """The action's effect was seen on the host."""
        return self.seen is Seen.FIXED

    @classmethod
    def could_not_check(cls, why: str, elapsed_s: float = 0.0) -> Verification:
        return cls(Seen.COULD_NOT_CHECK, strings.REM_COULD_NOT_READ.format(why=why), elapsed_s,
                   why=why)

    def to_dict(self) -> dict[str, Any]:
        return {"seen": self.seen.value, "ok": self.ok, "detail": self.detail,
                "elapsed_s": round(self.elapsed_s, 3), "respawned": self.respawned,
                "evidence": self.evidence, "why": self.why}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verification:
        """A stored verification; one written before ``seen`` existed says ``ok``."""
        seen = Seen(data["seen"]) if data.get("seen") else Seen.of(bool(data["ok"]))
        return cls(seen, detail=str(data["detail"]),
                   elapsed_s=float(data.get("elapsed_s", 0.0)),
                   respawned=bool(data.get("respawned", False)),
                   evidence=dict(data.get("evidence") or {}), why=str(data.get("why") or ""))


@dataclass(frozen=True)
class ActionResult:
    kind: str
    params: dict[str, str]
    host: str
    outcome: Outcome
    summary: str  # one human line, shown in the thread and the CLI
    approver: str
    evidence_hash: str | None
    planned: tuple[str, ...] = ()  # exact commands as shown before approval
    commands: tuple[CommandRecord, ...] = ()
    captured: CapturedState | None = None
    verification: Verification | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    revert_params: dict[str, str] | None = None  # systemd.revert params, when revertable
    incident_id: str | None = None
    proposals: tuple[dict[str, Any], ...] = ()  # {kind, params, reason, risk}: what to do instead
    rollback: tuple[CommandRecord, ...] = ()  # what undid a part-way failure

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    @property
    def revertable(self) -> bool:
        return self.revert_params is not None and self.outcome not in (
            Outcome.NOOP, Outcome.DRY_RUN, Outcome.UNREACHABLE, Outcome.REFUSED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "params": dict(self.params), "host": self.host,
            "outcome": self.outcome.value, "ok": self.ok, "summary": self.summary,
            "approver": self.approver, "evidence_hash": self.evidence_hash,
            "incident_id": self.incident_id, "planned": list(self.planned),
            "commands": [c.to_dict() for c in self.commands],
            "captured": self.captured.to_dict() if self.captured else None,
            "verification": self.verification.to_dict() if self.verification else None,
            "started_at": self.started_at, "duration_s": round(self.duration_s, 3),
            "revert_params": self.revert_params, "revertable": self.revertable,
            "proposals": [dict(p) for p in self.proposals],
            "rollback": [c.to_dict() for c in self.rollback],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActionResult:
        """Rebuild a stored result (incident meta) so Revert works after a restart."""
        captured = data.get("captured")
        verification = data.get("verification")
        return cls(
            kind=data["kind"], params=dict(data["params"]), host=data["host"],
            outcome=Outcome(data["outcome"]), summary=data["summary"],
            approver=data["approver"], evidence_hash=data.get("evidence_hash"),
            planned=tuple(data.get("planned") or ()),
            commands=tuple(CommandRecord.from_dict(c) for c in data.get("commands") or ()),
            captured=CapturedState.from_dict(captured) if captured else None,
            verification=Verification.from_dict(verification) if verification else None,
            started_at=float(data.get("started_at", 0.0)),
            duration_s=float(data.get("duration_s", 0.0)),
            revert_params=data.get("revert_params"), incident_id=data.get("incident_id"),
            proposals=tuple(dict(p) for p in data.get("proposals") or ()),
            rollback=tuple(CommandRecord.from_dict(c) for c in data.get("rollback") or ()),
        )
