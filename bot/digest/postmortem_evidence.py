"""What an incident changed on the host, how to undo it, and the evidence behind it. Pure.

Part of the postmortem (``bot/digest/postmortem.py``): the catalog actions whose commands
ran on the host (each with its exit statuses and the ``incident-bot act`` line that reverts
it from the state captured before acting), and the findings, probes and verification.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from bot.domain.findings import Diagnosis
from bot.remediation.actions.registry import find

ACTION_DONE = frozenset({"action.succeeded", "action.noop", "action.failed", "action.respawned",
                          "action.still_held", "action.timed_out", "action.timed_out_but_done",
                          "action.unreachable", "action.refused"})


class AuditRow(Protocol):
    """What the builder reads of an audit entry (``storage.audit.AuditEntry`` fits)."""

    @property
    def ts(self) -> float: ...
    @property
    def actor(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def detail(self) -> dict[str, Any]: ...
    @property
    def evidence_hash(self) -> str | None: ...


@dataclass(frozen=True)
class PostmortemFacts:
    """The incident's flow facts the postmortem needs, whatever the record's shape."""

    diagnosis: Diagnosis | None = None
    message_at: float | None = None  # when the first chat message went out (Slack ts)
    permalink: str = ""
    revert_commands: tuple[str, ...] = ()  # the stored revert plan's shell commands
    revert_kind: str = ""
    evidence_hash: str = ""


@dataclass(frozen=True)
class CommandRun:
    command: str
    exit_status: int | None
    timed_out: bool = False


@dataclass(frozen=True)
class HostChange:
    """One catalog action that ran commands on the host, and how to undo it."""

    kind: str
    params: dict[str, str]
    outcome: str
    approver: str
    commands: tuple[CommandRun, ...]
    revert: str = ""  # the ``incident-bot act`` line that undoes it ("" if none)
    revert_commands: tuple[str, ...] = ()


@dataclass(frozen=True)
class FindingLine:
    code: str
    severity: str
    title: str


@dataclass(frozen=True)
class PostmortemEvidence:
    evidence_hash: str
    findings: tuple[FindingLine, ...]
    probes_run: int
    probes_failed: tuple[str, ...]  # "name (exit N)" for the probes that did not exit 0
    verification: tuple[str, ...]


def host_changes(host: str, entries: Iterable[AuditRow],
                 facts: PostmortemFacts) -> list[HostChange]:
    """Actions whose commands ran on the host; the revert line from the captured state."""
    out = []
    for e in entries:
        d = e.detail
        runs = tuple(CommandRun(str(c.get("command") or ""), c.get("exit_status"),
                                bool(c.get("timed_out"))) for c in d.get("commands") or ()
                     if isinstance(c, dict) and not c.get("skipped"))
        if e.action not in ACTION_DONE or not runs:
            continue
        revert, commands = _revert(host, d, facts)
        out.append(HostChange(kind=str(d.get("kind") or ""), outcome=str(d.get("outcome") or ""),
                              params={str(k): str(v) for k, v in (d.get("params") or {}).items()},
                              approver=str(d.get("approver") or e.actor), commands=runs,
                              revert=revert, revert_commands=commands))
    return out


def _revert(host: str, d: dict[str, Any], facts: PostmortemFacts) -> tuple[str, tuple[str, ...]]:
    params = d.get("revert_params") or {}
    action = find(str(d.get("kind") or ""))
    kind = action.revert_kind if action is not None else None
    if not d.get("revertable") or not params or kind is None:
        return "", ()
    line = f"incident-bot act {host} {kind} " + " ".join(
        f"{k}={v}" for k, v in sorted(params.items()))
    return line, facts.revert_commands if facts.revert_kind == kind else ()


def evidence(entries: Iterable[AuditRow], facts: PostmortemFacts) -> PostmortemEvidence:
    rows = list(entries)
    shown = facts.evidence_hash or next((e.evidence_hash for e in rows if e.evidence_hash), "")
    diag = facts.diagnosis
    findings = tuple(FindingLine(f.code, f.severity.value, f.title)
                     for f in (diag.findings if diag else ()))
    probes = diag.probes if diag else ()
    failed = tuple(f"{p.name} (exit {'timeout' if p.timed_out else p.exit_status})"
                   for p in probes if not p.ok)
    checks = tuple(_verification(e.detail) for e in rows
                   if e.action in ACTION_DONE and isinstance(e.detail.get("verification"), dict))
    return PostmortemEvidence(evidence_hash=shown or "", findings=findings, probes_run=len(probes),
                    probes_failed=failed, verification=checks)


def _verification(d: dict[str, Any]) -> str:
    v = d["verification"]
    note = str((v.get("evidence") or {}).get("window_note") or "")
    return f"{d.get('kind', '?')}: {v.get('detail', '')}" + (f"; {note}" if note else "")
