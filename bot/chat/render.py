"""Incident + diagnosis + proposed actions + approvals → one ``ChatMessage`` (pure).

The same message is re-rendered at every step (awaiting approval → approved by … →
result → revert) and edited in place, so everything a person needs is in one place.
All text from hosts, alerts and people is escaped (``bot.chat.text``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.chat.base import Button, ButtonStyle, ChatMessage, Section
from bot.chat.incident_view import (
    PLAN_BUTTON_STATES,
    incident_buttons,
    state_sections,
    status_lines,
)
from bot.chat.text import clip, code_safe, escape, inline_code, mentions
from bot.core import strings
from bot.domain.approval import Approval, ApprovalStatus
from bot.domain.findings import Diagnosis, Finding, ProposedAction

SEVERITY_ICON = {
    "critical": ":red_circle:",
    "warning": ":large_orange_circle:",
    "info": ":large_blue_circle:",
}
MAX_EVIDENCE_KEYS = 8
EVIDENCE_VALUE_CHARS = 200
MAX_GROUP_HOSTS = 20


class IncidentLike(Protocol):
    """What the renderer reads from an incident (the incident store's record fits)."""

    @property
    def id(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def state(self) -> str: ...


@dataclass(frozen=True)
class IncidentHeader:
    id: str
    host: str
    kind: str
    severity: str
    state: str


@dataclass(frozen=True)
class ActionPlan:
    """A proposed action, the exact commands it will run, and its approval's id."""

    action: ProposedAction
    commands: tuple[str, ...]
    approval_id: str
    destructive: bool = True  # destructive actions get a confirm dialog


@dataclass(frozen=True)
class StepResult:
    ok: bool
    text: str  # "GPUs free: 8 × 0 MiB held", "unit disabled", ...


def render_incident(
    incident: IncidentLike,
    diagnosis: Diagnosis,
    plans: Sequence[ActionPlan] = (),
    approvals: Mapping[str, Approval] | None = None,
    results: Sequence[StepResult] = (),
    revert: ActionPlan | None = None,
    *,
    seq: int = 0,
) -> ChatMessage:
    """The full incident message for the current state; buttons follow from the state."""
    approvals = approvals or {}
    state, meta = _val(incident.state), dict(getattr(incident, "meta", None) or {})
    clickable = state in PLAN_BUTTON_STATES
    sections = [_summary(incident, diagnosis)]
    sections += [Section(line) for line in status_lines(meta)]
    sections += [finding_section(f) for f in diagnosis.findings]
    sections += state_sections(state, meta, [f.title for f in diagnosis.findings])
    sections += [_plan_section(incident.host, p, approvals.get(p.approval_id), clickable)
                 for p in plans]
    if results:
        sections.append(_results_section(results))
    if revert is not None:
        sections.append(
            _revert_section(incident.host, revert, approvals.get(revert.approval_id), clickable))
    severity = escape(_val(incident.severity))
    return ChatMessage(
        text=f"{escape(incident.host)}: {escape(incident.kind)} ({severity}) — {_state(incident)}",
        header=header_text(incident),
        sections=tuple(sections),
        buttons=incident_buttons(state, str(incident.id), meta),
        context=_context(incident, plans, approvals),
        incident_id=str(incident.id),
        seq=seq,
    )


def header_text(incident: IncidentLike) -> str:
    icon = SEVERITY_ICON.get(_val(incident.severity), ":white_circle:")
    return (
        f"{icon} {incident.host} · {incident.kind} · {_val(incident.severity)} · {_state(incident)}"
    )


def _summary(incident: IncidentLike, diagnosis: Diagnosis) -> Section:
    text = (
        f"*Incident {escape(incident.id)}* on *{escape(incident.host)}* · playbook "
        f"{inline_code(diagnosis.playbook)} · diagnosis {escape(_val(diagnosis.status))} "
        f"in {diagnosis.duration_s:.1f}s"
    )
    hosts = tuple(getattr(incident, "hosts", ()) or ())
    if len(hosts) > 1:  # a group parent: a rack reboot is one message listing its hosts
        shown = ", ".join(escape(h) for h in hosts[:MAX_GROUP_HOSTS])
        more = f" and {len(hosts) - MAX_GROUP_HOSTS} more" if len(hosts) > MAX_GROUP_HOSTS else ""
        text += f"\n{len(hosts)} hosts alerted together: {shown}{more}"
    return Section(text=text)


def finding_section(finding: Finding) -> Section:
    icon = SEVERITY_ICON.get(_val(finding.severity), ":white_circle:")
    text = f"{icon} *{escape(finding.title)}*"
    if finding.detail:
        text += f"\n{escape(finding.detail)}"
    gpus, grid = finding.evidence.get("gpus"), finding.evidence.get("grid")
    code = gpu_table(gpus) if isinstance(gpus, list) and gpus else _evidence_lines(finding.evidence)
    code = code_safe(grid) if isinstance(grid, str) and grid else code  # gpu_health verdicts
    return Section(text=text, code=code or None)


def gpu_table(gpus: Sequence[Any]) -> str:
    """A compact per-GPU table: memory used/total, utilization, who holds it."""
    rows = [f"{'GPU':>3}  {'MEMORY USED / TOTAL':<26} {'UTIL':>4}  HOLDER"]
    for g in gpus:
        if not isinstance(g, Mapping):
            continue
        used, total = _num(g.get("memory_used_mib")), _num(g.get("memory_total_mib"))
        pct = f"({used / total:.0%})" if used is not None and total else ""
        mem = f"{_gib(used)} / {_gib(total)} GiB {pct}".strip()
        util = _num(g.get("utilization_pct"))
        util_s = f"{util:.0f}%" if util is not None else "?"
        rows.append(
            f"{g.get('index', '?')!s:>3}  {mem:<26} {util_s:>4}  {_holder(g.get('holder'))}"
        )
    return code_safe("\n".join(rows))


def _holder(holder: Any) -> str:
    if holder is None or holder == "":
        return "-"
    if isinstance(holder, Mapping):
        name = holder.get("unit") or holder.get("name") or holder.get("cmd") or "?"
        pid = holder.get("pid")
        return clip(f"{name} (pid {pid})" if pid is not None else str(name), 48)
    if isinstance(holder, list | tuple):
        return clip(", ".join(_holder(h) for h in holder), 48)
    return clip(str(holder), 48)


def _evidence_lines(evidence: Mapping[str, Any]) -> str:
    lines = []
    for key in list(evidence)[:MAX_EVIDENCE_KEYS]:
        value = evidence[key]
        shown = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
        lines.append(f"{key}: {clip(shown, EVIDENCE_VALUE_CHARS)}")
    if len(evidence) > MAX_EVIDENCE_KEYS:
        lines.append(f"… {len(evidence) - MAX_EVIDENCE_KEYS} more")
    return code_safe("\n".join(lines))


def _plan_section(
    host: str, plan: ActionPlan, approval: Approval | None, clickable: bool = True
) -> Section:
    a = plan.action
    params = " ".join(f"{escape(k)}={inline_code(v)}" for k, v in sorted(a.params.items()))
    text = f"*Proposed:* {inline_code(a.kind)} {params}\n_{escape(a.reason)}_"
    if a.risk:
        text += f"\n*Risk:* {escape(a.risk)}"
    decision = decision_line(approval)
    if decision:
        text += f"\n{decision}"
    code = code_safe("\n".join(f"$ {c}" for c in plan.commands)) if plan.commands else None
    show = clickable and (approval is None or approval.status is ApprovalStatus.PENDING)
    return Section(text=text, code=code, buttons=_buttons(host, plan) if show else ())


def _buttons(host: str, plan: ActionPlan) -> tuple[Button, ...]:
    confirm = None
    if plan.destructive:
        confirm = f"{strings.CONFIRM_TITLE.format(host=host)} {plan.action.kind}: " + "; ".join(
            plan.commands
        )
    return (
        Button("Approve", "approve", plan.approval_id, ButtonStyle.PRIMARY, confirm),
        Button("Deny", "deny", plan.approval_id, ButtonStyle.DANGER),
    )


def decision_line(approval: Approval | None) -> str:
    """One line saying where an approval stands (empty while nobody has acted)."""
    if approval is None:
        return ""
    when = _utc(approval.expires_at)
    match approval.status:
        case ApprovalStatus.APPROVED:
            return strings.APPROVAL_MARK_APPROVED.format(who=mentions(approval.approvers))
        case ApprovalStatus.DENIED:
            return strings.APPROVAL_MARK_DENIED.format(
                who=mentions([approval.decided_by]), reason=escape(approval.reason)
            )
        case ApprovalStatus.EXPIRED:
            return strings.APPROVAL_MARK_EXPIRED.format(when=when)
        case ApprovalStatus.CANCELLED:
            return strings.VIEW_WITHDRAWN.format(reason=escape(approval.reason))
    if approval.approvers:
        return strings.APPROVAL_MARK_WAITING.format(who=mentions(approval.approvers))
    return ""


def _results_section(results: Sequence[StepResult]) -> Section:
    lines = [f"{':white_check_mark:' if r.ok else ':x:'} {escape(r.text)}" for r in results]
    return Section(text="*Result*\n" + "\n".join(lines))


def _revert_section(
    host: str, plan: ActionPlan, approval: Approval | None, clickable: bool = True
) -> Section:
    section = _plan_section(host, plan, approval, clickable)
    buttons = tuple(
        Button("Revert", "revert", b.value, ButtonStyle.DEFAULT, b.confirm)
        for b in section.buttons
        if b.action_id == "approve"
    )
    return Section(text="*Revert available*\n" + section.text, code=section.code, buttons=buttons)


def _context(
    incident: IncidentLike, plans: Sequence[ActionPlan], approvals: Mapping[str, Approval]
) -> tuple[str, ...]:
    line = f"State: *{_state(incident)}* · incident {escape(incident.id)}"
    pending = [
        approvals[p.approval_id]
        for p in plans
        if p.approval_id in approvals and approvals[p.approval_id].is_open
    ]
    if pending:
        line += f" · approval expires {_utc(min(a.expires_at for a in pending))} UTC"
    return (line,)


def evidence_hash(diagnosis: Diagnosis) -> str:
    """sha256 of the findings exactly as rendered: what the approver saw and approved."""
    h = hashlib.sha256()
    for section in (finding_section(f) for f in diagnosis.findings):
        h.update(section.text.encode())
        h.update(b"\0")
        h.update((section.code or "").encode())
        h.update(b"\0")
    return "sha256:" + h.hexdigest()


def _state(incident: IncidentLike) -> str:
    return _val(incident.state).replace("_", " ")


def _val(value: Any) -> str:
    return str(getattr(value, "value", value))


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _gib(mib: float | None) -> str:
    return f"{mib / 1024:.1f}" if mib is not None else "?"


def _utc(ts: float) -> str:
    return time.strftime("%H:%M", time.gmtime(ts))
