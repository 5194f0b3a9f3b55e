"""The postmortem of one incident, built from the incident and its audit trail. Pure.

The audit stream already holds every step with its actor and time; a retrospective needs
the same facts ordered as a story (detected → diagnosed → approved → acted → verified →
resumed → resolved), the three durations teams track (acknowledge, mitigate, resolve), what
the GPUs cost while they were lost, what changed on the host and how to undo it. Nothing
here reads Redis: ``storage`` hands in the incident and its ``AuditEntry`` rows, and
``bot/digest/postmortem_render.py`` turns the result into Markdown or JSON.

The incident record's flow fields are read in ONE place, ``facts_from_incident``, so a
change of the record's shape is one edit here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.digest.postmortem_evidence import (
    ACTION_DONE,
    AuditRow,
    HostChange,
    PostmortemEvidence,
    PostmortemFacts,
    evidence,
    host_changes,
)
from bot.domain.findings import Diagnosis, Severity
from bot.domain.incident import Incident

SECONDS_PER_HOUR = 3600.0
# Who counts as a person acknowledging: the first of these by anyone (escalation's rule).
ACK_ACTIONS = ("incident.ack", "approval.approved", "approval.first_approver",
               "approval.denied", "incident.resolve", "incident.snoozed", "incident.escalate")
_DIAGNOSED_FROM = "diagnosing"


class Step(StrEnum):
    DETECTED = "detected"
    FIRST_MESSAGE = "first message"
    DIAGNOSED = "diagnosed"
    ACKNOWLEDGED = "acknowledged"
    APPROVED = "approved"
    DENIED = "denied"
    ACTION = "action"
    GATE = "health gate"
    VERIFIED = "verified"
    ACTION_FAILED = "action failed"
    RESUMED = "resumed"
    SNOOZED = "snoozed"
    ESCALATED = "escalated"
    RESOLVED = "resolved"


@dataclass(frozen=True)
class TimelineEvent:
    step: Step
    at: float
    since_s: float  # seconds since detection
    who: str
    what: str


@dataclass(frozen=True)
class Postmortem:
    incident_id: str
    host: str
    kind: str
    severity: str
    summary: str
    state: str
    detected_at: float
    resolved_at: float | None
    events: tuple[TimelineEvent, ...]
    tta_s: float | None
    acked_by: str
    ttm_s: float | None
    ttr_s: float | None
    gpus: int
    gpu_hours_lost: float | None
    changes: tuple[HostChange, ...]
    evidence: PostmortemEvidence
    permalink: str = ""
    people: tuple[str, ...] = field(default_factory=tuple)
    # detection to the verified fix that held (a later revert undoes it), else to the
    # person's resolve; None while neither happened: the MTTR ``/ir stats`` averages
    recovered_s: float | None = None
    reverted: bool = False  # the last fix was reverted and nothing fixed it since


def facts_from_incident(incident: Incident) -> PostmortemFacts:
    """The one reader of the incident's flow fields."""
    chat, revert = incident.chat, incident.revert_plan
    return PostmortemFacts(
        diagnosis=incident.diagnosis,
        message_at=_slack_ts(chat.ts if chat else "", incident.first_seen),
        permalink=chat.permalink if chat else "",
        revert_commands=revert.commands if revert else (),
        revert_kind=revert.action.kind if revert else "",
        evidence_hash=incident.evidence_hash,
    )


def _slack_ts(ts: str, detected: float) -> float | None:
    """A Slack message ts is the epoch second it was posted; anything else is not a time."""
    try:
        value = float(ts)
    except ValueError:
        return None
    return value if detected - 60 <= value <= detected + 30 * 86400 else None


def build_postmortem(incident: Incident, entries: Sequence[AuditRow],
                     facts: PostmortemFacts) -> Postmortem:
    """The whole postmortem; entries are the incident's audit rows, oldest first."""
    detected = incident.first_seen or (entries[0].ts if entries else 0.0)
    events = sorted(_events(entries, facts, detected), key=lambda e: e.at)
    ack = next((e for e in entries if e.action.startswith(ACK_ACTIONS)), None)
    mitigated = next((e.ts for e in entries if _to(e) == "verified"), None)
    resolved = incident.resolved_at or next((e.ts for e in entries if _to(e) == "resolved"), None)
    gpus = affected_gpus(facts.diagnosis)
    fixed_at, reverted = held_fix(entries, facts.revert_kind)
    recovered = fixed_at if fixed_at is not None else resolved
    return Postmortem(
        incident_id=incident.id, host=incident.host, kind=incident.kind,
        severity=incident.severity.value, summary=incident.summary, state=incident.state.value,
        detected_at=detected, resolved_at=resolved, events=tuple(events),
        tta_s=None if ack is None else ack.ts - detected, acked_by=ack.actor if ack else "",
        ttm_s=None if mitigated is None else mitigated - detected,
        ttr_s=None if resolved is None else resolved - detected, gpus=gpus,
        gpu_hours_lost=gpu_hours(gpus, detected, mitigated if mitigated is not None else resolved),
        changes=tuple(host_changes(incident.host, entries, facts)),
        evidence=evidence(entries, facts), permalink=facts.permalink,
        people=tuple(dict.fromkeys(e.actor for e in entries if e.action.startswith(ACK_ACTIONS))),
        recovered_s=None if recovered is None else recovered - detected, reverted=reverted,
    )


def held_fix(entries: Sequence[AuditRow], revert_kind: str) -> tuple[float | None, bool]:
    """When the fix that held was verified, and whether the last fix was reverted: a
    verification after the revert action (``revert_kind``) is the revert's own, not a
    fix; a revert undoes the fix before it."""
    fixed_at: float | None = None
    reverted = False
    last_kind = ""
    for e in entries:
        if e.action in ACTION_DONE:
            last_kind = str(e.detail.get("kind") or "")
            if revert_kind and last_kind == revert_kind:
                fixed_at, reverted = None, True
        elif _to(e) == "verified" and not (revert_kind and last_kind == revert_kind):
            if fixed_at is None:
                fixed_at = e.ts
            reverted = False
    return fixed_at, reverted


def affected_gpus(diagnosis: Diagnosis | None) -> int:
    """GPUs a non-info finding names (``evidence.gpus[].index``): the ones the incident cost."""
    if diagnosis is None:
        return 0
    seen: set[int] = set()
    for finding in diagnosis.findings:
        if finding.severity is Severity.INFO:
            continue
        for gpu in finding.evidence.get("gpus") or ():
            if isinstance(gpu, dict) and isinstance(gpu.get("index"), int):
                seen.add(gpu["index"])
    return len(seen)


def gpu_hours(gpus: int, start: float, end: float | None) -> float | None:
    """GPUs × hours from detection to mitigation; unknown while nothing mitigated it."""
    if end is None:
        return None
    return gpus * max(0.0, end - start) / SECONDS_PER_HOUR


def _to(entry: AuditRow) -> str:
    return str(entry.detail.get("to") or "") if entry.action == "transition" else ""


def _events(entries: Iterable[AuditRow], facts: PostmortemFacts,
            detected: float) -> list[TimelineEvent]:
    out = [TimelineEvent(Step.DETECTED, detected, 0.0, *_opened(entries))]
    if facts.message_at is not None:
        out.append(TimelineEvent(Step.FIRST_MESSAGE, facts.message_at,
                                 facts.message_at - detected, "incident-bot", "posted in Slack"))
    for entry in entries:
        found = _step(entry)
        if found is not None:
            step, what = found
            out.append(TimelineEvent(step, entry.ts, entry.ts - detected, entry.actor, what))
    return out


def _opened(entries: Iterable[AuditRow]) -> tuple[str, str]:
    first = next((e for e in entries if e.action == "opened"), None)
    if first is None:
        return "", ""
    return first.actor, str(first.detail.get("summary") or "")


def _step(entry: AuditRow) -> tuple[Step, str] | None:
    """The timeline step an audit entry stands for (most entries are not one)."""
    d, action = entry.detail, entry.action
    if action == "transition":
        return _transition_step(d)
    if action == "incident.ack":
        return Step.ACKNOWLEDGED, ""
    if action in ("approval.approved", "approval.denied"):
        step = Step.APPROVED if action == "approval.approved" else Step.DENIED
        return step, str(d.get("kind") or "")
    if action in ACTION_DONE:
        return Step.ACTION, _action_text(d, action.removeprefix("action."))
    if action.startswith("gate."):
        return Step.GATE, action.removeprefix("gate.")
    if action == "incident.snoozed":
        return Step.SNOOZED, str(d.get("duration_s") or "")
    if action == "incident.escalate":
        return Step.ESCALATED, ""
    return None


def _transition_step(d: dict[str, Any]) -> tuple[Step, str] | None:
    reason = str(d.get("reason") or "")
    if d.get("from") == _DIAGNOSED_FROM:
        return Step.DIAGNOSED, reason
    step = {"verified": Step.VERIFIED, "action_failed": Step.ACTION_FAILED,
            "resumed": Step.RESUMED, "resolved": Step.RESOLVED}.get(str(d.get("to")))
    return None if step is None else (step, reason)


def _action_text(d: dict[str, Any], outcome: str) -> str:
    params = " ".join(f"{k}={v}" for k, v in sorted((d.get("params") or {}).items()))
    exits = [c.get("exit_status") for c in d.get("commands") or () if isinstance(c, dict)]
    shown = ", ".join("timeout" if x is None else str(x) for x in exits)
    tail = f" (exit {shown})" if exits else ""
    return f"{d.get('kind', '?')} {params}".strip() + f": {outcome}{tail}"


