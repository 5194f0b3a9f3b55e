"""Incident + diagnosis + proposed actions + approvals → one ``ChatMessage`` (pure).

The same message is re-rendered from stored state at every step (awaiting approval →
approved by … → result → revert) and edited in place. It reads in five seconds: the
headline, the state line and the ask come from ``bot.chat.summary``; the per-GPU evidence
goes to the thread once (``thread_evidence``), raw probe output only on demand.
All text from hosts, alerts and people is escaped (``bot.chat.text``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.chat import cleanup_view, summary
from bot.chat.base import Button, ButtonStyle, ChatMessage, Section
from bot.chat.incident_view import (
    EVIDENCE_STATES,
    PLAN_BUTTON_STATES,
    Marks,
    incident_buttons,
    state_sections,
    status_lines,
)
from bot.chat.summary import IncidentLike
from bot.chat.text import clip, code_safe, escape, in_gib, mentions
from bot.core import strings
from bot.domain.approval import Approval, ApprovalStatus
from bot.domain.findings import Diagnosis, ProposedAction
from bot.domain.hardware import outlasting
from bot.domain.incident import Incident
from bot.domain.incident_record import ActionPlan, StepResult
from bot.domain.runbooks import runbook_links
from bot.domain.xid_storm import storm_line

MAX_GROUP_HOSTS = 20


@dataclass(frozen=True)
class IncidentHeader:
    id: str
    host: str
    kind: str
    severity: str
    state: str
    first_seen: float = 0.0


def render_incident(
    incident: IncidentLike,
    diagnosis: Diagnosis,
    plans: Sequence[ActionPlan] = (),
    approvals: Mapping[str, Approval] | None = None,
    results: Sequence[StepResult] = (),
    revert: ActionPlan | None = None,
    *,
    seq: int = 0,
    now: float | None = None,
    oncall: str | None = None,
    runbooks: Mapping[str, str] | None = None,
    can_escalate: bool = True,
) -> ChatMessage:
    """The parent message for the current state: headline, state line, one sentence per
    action, buttons from the state. The evidence lives in the thread (``thread_evidence``).
    A verified, resumed or resolved incident leads with what was done and what is true now,
    the original headline below it as context; withdrawn and expired offers leave the
    message; ``can_escalate`` is False when escalation has nowhere to go (no Escalate)."""
    approvals = approvals or {}
    now = time.time() if now is None else now
    state, marks = _val(incident.state), Marks.of(incident)
    clickable = state in PLAN_BUTTON_STATES
    plans = shown_plans(state, plans, approvals)
    earlier = approved_actions(plans, approvals)
    lead = summary.outcome(state, getattr(incident, "last_outcome", None), earlier, diagnosis,
                           results)
    word = lead.word if lead is not None else None
    sections = [_headline(incident, diagnosis, now, oncall, lead),
                Section(summary.state_line(incident, now, word))]
    sections += [Section(line) for line in status_lines(marks)]
    sections += _cleared(incident, state)
    sections += state_sections(state, getattr(incident, "last_outcome", None),
                               _state_findings(state, diagnosis), led=lead is not None)
    sections += _also_found(state, diagnosis)
    settled = state in summary.OUTCOME_STATES
    sections += _plan_sections(incident.host, plans, diagnosis, approvals, clickable, settled)
    if results:
        sections.append(_results_section(results))
    if revert is not None and shown_plans(state, (revert,), approvals):
        sections.append(_revert_section(incident.host, revert, diagnosis,
                                        approvals.get(revert.approval_id), clickable, settled))
    buttons = incident_buttons(state, str(incident.id), bool(marks.acked_by),
                               can_escalate=can_escalate,
                               check_again=bool(_cleared(incident, state)))
    if diagnosis.probes and state in EVIDENCE_STATES:  # raw output on demand, in the thread
        buttons += (Button(strings.MSG_EVIDENCE_BUTTON, "evidence", str(incident.id)),)
    buttons += runbook_buttons(diagnosis, runbooks or {})
    return ChatMessage(
        text=summary.notification_text(incident, diagnosis, oncall=oncall, earlier=earlier),
        sections=tuple(sections),
        buttons=buttons,
        context=_context(plans, approvals) if clickable else (),
        incident_id=str(incident.id),
        seq=seq,
    )


def runbook_buttons(diagnosis: Diagnosis, runbooks: Mapping[str, str]) -> tuple[Button, ...]:
    """A link button per runbook the findings point to (issue 27): the page opens in the
    browser; the click itself is only acknowledged."""
    return tuple(Button(strings.MSG_RUNBOOK_BUTTON.format(code=link.code), "runbook", link.code,
                        url=link.url) for link in runbook_links(diagnosis, runbooks))


def _cleared(incident: IncidentLike, state: str) -> list[Section]:
    """A hardware fault whose alert cleared: the alert is gone, the fault is not."""
    cleared_at = getattr(incident, "cleared_at", None)
    if not cleared_at or state == "resolved" or not isinstance(incident, Incident):
        return []
    faults = outlasting(incident)
    if not faults:
        return []
    fault = clip("; ".join(summary.plain_title(f) for f in faults), 300)
    return [Section(strings.VIEW_ALERT_CLEARED.format(when=_utc(cleared_at), fault=fault))]


def _headline(incident: IncidentLike, diagnosis: Diagnosis, now: float,
              oncall: str | None, lead: summary.Lead | None = None) -> Section:
    """The headline; a critical one starts with the on-call mention (in a block, so it
    pings: with blocks, ``text`` is only the notification fallback). Once a word leads
    (``summary.outcome``), it heads the message and the headline becomes context."""
    mention = summary.oncall_mention(oncall) if _val(incident.severity) == "critical" else ""
    if lead is not None:  # what was done and what is true now; the headline becomes context
        host = escape(incident.host)
        was = summary.headline(incident, diagnosis, now).removeprefix(f"{host}: ")
        text = f"{mention}*{host}: {lead.text}*\n" + lead.below.format(headline=was)
    else:
        text = f"{mention}*{summary.headline(incident, diagnosis, now)}*"
        context = summary.context_line(diagnosis)
        if context:  # the crash or reboot: context for the headline, never the headline
            text += "\n" + context
    xids = tuple(getattr(incident, "xids", ()) or ())
    if xids:  # an Xid storm folded into this incident: "Xid 45 ×224 since 10:02 UTC"
        text += "\n" + escape(storm_line(xids, now, held=_val(incident.severity) != "critical"))
    hosts = tuple(getattr(incident, "hosts", ()) or ())
    if len(hosts) > 1:  # a group parent: a rack reboot is one message listing its hosts
        shown = ", ".join(escape(h) for h in hosts[:MAX_GROUP_HOSTS])
        more = f" and {len(hosts) - MAX_GROUP_HOSTS} more" if len(hosts) > MAX_GROUP_HOSTS else ""
        text += "\n" + strings.MSG_GROUP_HOSTS.format(n=len(hosts), hosts=shown, more=more)
    return Section(text=text)


def approved_actions(plans: Sequence[ActionPlan],
                     approvals: Mapping[str, Approval]) -> list[ProposedAction]:
    """The actions people approved and no revert undid since, in the order offered."""
    return [p.action for p in plans if (a := approvals.get(p.approval_id)) is not None
            and a.status is ApprovalStatus.APPROVED and not p.undone]


def shown_plans(state: str, plans: Sequence[ActionPlan],
                approvals: Mapping[str, Approval]) -> list[ActionPlan]:
    """The offers the message still shows: never a withdrawn one; an expired one only while
    the incident is ``expired`` (it is why); on a resolved incident only what was decided
    (an offer nobody took is moot there)."""
    out = []
    for p in plans:
        approval = approvals.get(p.approval_id)
        status = approval.status if approval is not None else ApprovalStatus.PENDING
        if status is ApprovalStatus.CANCELLED:
            continue
        if status is ApprovalStatus.EXPIRED and state != "expired":
            continue
        if state == "resolved" and status is ApprovalStatus.PENDING:
            continue
        out.append(p)
    return out


def _state_findings(state: str, diagnosis: Diagnosis) -> list[str]:
    """What the state's note lists: every finding when the diagnosis failed; beside the
    headline, the rest folded (one line for GPUs 0–7 that share a reason)."""
    if state == "diagnosis_failed":
        return [summary.plain_title(f) for f in diagnosis.findings]
    return summary.also_found(diagnosis, notes=True)


def _also_found(state: str, diagnosis: Diagnosis) -> list[Section]:
    """The other warnings' titles on one line (info stays in the thread and raw evidence;
    the failed and nothing-to-do states already list every finding)."""
    if state in ("diagnosis_failed", "no_action"):
        return []
    others = summary.also_found(diagnosis)
    if not others:
        return []
    return [Section(strings.MSG_ALSO_FOUND.format(titles=clip("; ".join(others), 300)))]


def thread_evidence(diagnosis: Diagnosis) -> tuple[Section, ...]:
    """The thread's evidence, posted once: the per-GPU table, any GPU health grid, and
    the disk cleanup's preview."""
    per_gpu = summary.evidence_table(diagnosis)
    tables = (per_gpu, cleanup_view.table(diagnosis))
    sections = [t for t in tables if t is not None]
    for f in diagnosis.findings if per_gpu is None else ():  # one per-GPU table, not two
        grid = f.evidence.get("grid")
        if isinstance(grid, str) and grid:
            sections.append(Section(text=f"*{summary.plain_title(f)}*", code=code_safe(grid)))
    return tuple(sections)


def _plan_sections(host: str, plans: Sequence[ActionPlan], diagnosis: Diagnosis,
                   approvals: Mapping[str, Approval], clickable: bool,
                   settled: bool = False) -> list[Section]:
    """One section per plan; a cleanup's per-part plans share one section (one row of
    buttons), where the first of them would be."""
    parts = [p for p in plans if cleanup_view.is_part(p.action)]
    out: list[Section] = []
    for p in plans:
        if parts and p is parts[0]:
            out += _parts_section(host, parts, diagnosis, approvals, clickable)
        elif not cleanup_view.is_part(p.action):
            out.append(_plan_section(host, p, diagnosis, approvals.get(p.approval_id),
                                     clickable, settled))
    return out


def _parts_section(host: str, parts: Sequence[ActionPlan], diagnosis: Diagnosis,
                   approvals: Mapping[str, Approval], clickable: bool) -> list[Section]:
    """Approve buttons for the parts still pending; a line for each one decided (a part
    withdrawn because another was chosen says nothing)."""
    pending, decided = [], []
    for p in parts:
        approval = approvals.get(p.approval_id)
        if approval is None or approval.status is ApprovalStatus.PENDING:
            pending.append((p.action, p.approval_id, _buttons(host, p)[0].confirm))
        elif approval.status is not ApprovalStatus.CANCELLED:
            name = cleanup_view.part_name(cleanup_view.covered(p.action, diagnosis))
            decided.append(f"{escape(name)}: {decision_line(approval)}")
    if not (pending and clickable) and not decided:
        return []
    return [cleanup_view.parts_section(pending if clickable else [], diagnosis, decided)]


def _plan_section(host: str, plan: ActionPlan, diagnosis: Diagnosis,
                  approval: Approval | None, clickable: bool = True,
                  settled: bool = False) -> Section:
    """The offer as a sentence with its buttons; once the incident is settled (verified,
    resumed, resolved) an approved offer is one line: who approved what, no "Proposed"."""
    if settled and approval is not None and approval.status is ApprovalStatus.APPROVED:
        line = strings.MSG_PLAN_APPROVED.format(
            mark=decision_line(approval), sentence=summary.action_done_sentence(plan.action,
                                                                               diagnosis))
        return Section(strings.MSG_PLAN_UNDONE.format(line=line) if plan.undone else line)
    text = summary.action_sentence(plan.action, diagnosis)
    decision = decision_line(approval)
    if decision:
        text += f"\n{decision}"
    show = clickable and (approval is None or approval.status is ApprovalStatus.PENDING)
    return Section(text=text, buttons=_buttons(host, plan) if show else ())


def offer_buttons(host: str, plan: ActionPlan) -> tuple[Button, ...]:
    """The buttons a pending offer shows on the card (Approve with the exact commands in
    its confirm dialog, then Deny): a storm's table row offers the same first one."""
    return _buttons(host, plan)


def _buttons(host: str, plan: ActionPlan) -> tuple[Button, ...]:
    """Approve carries the exact commands in its confirm dialog; Deny is never red. An
    offer that undoes a fix is a plain Revert that always asks first, never primary."""
    if summary.is_revert(plan.action.kind):
        return (_revert_button(host, plan),
                Button(strings.MSG_DENY, "deny", plan.approval_id, ButtonStyle.DEFAULT))
    confirm = None
    if plan.destructive:
        confirm = (f"{strings.CONFIRM_TITLE.format(host=host)} "
                   f"{summary.action_phrase(plan.action)}: " + "; ".join(plan.commands))
    return (
        Button(strings.MSG_APPROVE, "approve", plan.approval_id, ButtonStyle.PRIMARY, confirm),
        Button(strings.MSG_DENY, "deny", plan.approval_id, ButtonStyle.DEFAULT),
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


def _revert_button(host: str, plan: ActionPlan) -> Button:
    """Revert: default-styled, with a confirm dialog naming what it undoes and runs."""
    sentence = summary.action_phrase(plan.action)
    confirm = strings.MSG_REVERT_CONFIRM.format(host=host, sentence=sentence[:1].upper()
                                                + sentence[1:] + ".")
    if plan.commands:
        confirm += " " + "; ".join(plan.commands)
    return Button(strings.MSG_REVERT_BUTTON, "revert", plan.approval_id, ButtonStyle.DEFAULT,
                  confirm)


def _results_section(results: Sequence[StepResult]) -> Section:
    lines = [f"{':white_check_mark:' if r.ok else ':x:'} {escape(in_gib(r.text))}"
             for r in results]
    return Section(text=strings.MSG_RESULT_TITLE + "\n" + "\n".join(lines))


def _revert_section(host: str, plan: ActionPlan, diagnosis: Diagnosis,
                    approval: Approval | None, clickable: bool = True,
                    settled: bool = False) -> Section:
    section = _plan_section(host, plan, diagnosis, approval, clickable, settled)
    if settled and approval is not None and approval.status is ApprovalStatus.APPROVED:
        return section  # done: no "Revert available" over it
    buttons = (_revert_button(host, plan),) if section.buttons else ()
    return Section(text=strings.MSG_REVERT_AVAILABLE + "\n" + section.text, buttons=buttons)


def _context(plans: Sequence[ActionPlan], approvals: Mapping[str, Approval]) -> tuple[str, ...]:
    pending = [
        approvals[p.approval_id]
        for p in plans
        if p.approval_id in approvals and approvals[p.approval_id].is_open
    ]
    if not pending:
        return ()
    return (strings.MSG_APPROVAL_EXPIRES.format(when=_utc(min(a.expires_at for a in pending))),)


def _val(value: Any) -> str:
    return str(getattr(value, "value", value))


def _utc(ts: float) -> str:
    return time.strftime("%H:%M", time.gmtime(ts))
