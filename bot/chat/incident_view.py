"""What the incident message shows for its state: the state's own note and its buttons (pure).

Buttons are a function of state (docs/incident-states.md): a person can only click what the
bot can still do. Incident-level buttons carry the incident id; Snooze also its duration.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.chat.base import Button, ButtonStyle, Section
from bot.chat.text import escape, in_gib, mention
from bot.chat.transcript import transcript_status
from bot.core import strings
from bot.domain.action_result import ActionResult
from bot.domain.incident_record import LastOutcome, Running, Snooze

SNOOZES = (("30 min", 1800), ("2 h", 7200), ("1 d", 86400))
# states whose pending approvals (first plans or follow-ups) keep their buttons
PLAN_BUTTON_STATES = frozenset({"awaiting_approval", "verified", "action_failed", "resumed"})
_BUTTONS: dict[str, tuple[str, ...]] = {
    "awaiting_approval": ("ack", "snooze", "resolve"),
    "diagnosis_failed": ("retry", "ack", "snooze", "resolve"),
    "no_action": ("resolve", "ack", "snooze"),
    "action_failed": ("retry", "escalate", "ack", "resolve"),
    "denied": ("retry", "resolve"),
    "expired": ("retry", "resolve"),
    "verified": ("resolve",),
    "resumed": ("resolve",),
    "snoozed": ("resolve",),
}
# where the "Raw evidence" button helps a decision still to make (verified: keep or revert);
# ``/ir evidence`` works in every state
# where a Retry may diagnose again (``bot.domain.flow.RETRYABLE``) besides its own buttons
CHECK_AGAIN_STATES = frozenset({"no_action", "denied", "expired"})
EVIDENCE_STATES = frozenset({"awaiting_approval", "diagnosis_failed", "no_action",
                             "action_failed", "denied", "expired", "verified"})
_LABEL = {"ack": "Ack", "resolve": "Resolve", "retry": "Retry", "escalate": "Escalate"}


@dataclass(frozen=True)
class Marks:
    """What people and the running action put on the incident: shown as small lines."""

    running: Running | None = None
    acked_by: str = ""
    escalated_by: str = ""
    resolved_by: str = ""
    snooze: Snooze | None = None

    @classmethod
    def of(cls, incident: object) -> Marks:
        """The marks of a stored ``Incident`` (a bare header has none)."""
        return cls(getattr(incident, "running", None), getattr(incident, "acked_by", ""),
                   getattr(incident, "escalated_by", ""), getattr(incident, "resolved_by", ""),
                   getattr(incident, "snooze", None))


def incident_buttons(state: str, incident_id: str, acked: bool, *,
                     can_escalate: bool = True, check_again: bool = False
                     ) -> tuple[Button, ...]:
    """The incident-level buttons for ``state`` (none on resolved or while acting); no
    Escalate when escalation has nowhere to go (no channel, no group to mention).
    ``check_again``: a hardware fault whose alert cleared: Retry looks again (a probe that
    no longer finds the fault resolves it) where the state allows one."""
    out: list[Button] = []
    verbs = _BUTTONS.get(state, ())
    if check_again and state in CHECK_AGAIN_STATES and "retry" not in verbs:
        verbs = ("retry", *verbs)
    for verb in verbs:
        if (verb == "ack" and acked) or (verb == "escalate" and not can_escalate):
            continue
        if verb == "snooze":
            out += [Button(f"Snooze {label}", "incident_snooze", f"{incident_id}|{secs}")
                    for label, secs in SNOOZES]
            continue
        style = ButtonStyle.PRIMARY if verb == "retry" else ButtonStyle.DEFAULT
        out.append(Button(_LABEL[verb], f"incident_{verb}", incident_id, style))
    return tuple(out)


def state_sections(state: str, last: LastOutcome | None, findings: list[str], *,
                   led: bool = False) -> list[Section]:
    """The state's own note: why the diagnosis failed, what nothing-to-do found (beside the
    headline), what failed. ``findings``: chat lines, already escaped (``summary``).
    ``led``: the message already leads with what failed ("Not fixed" or "Could not
    check"): only the next step and the commands' evidence here."""
    if state == "diagnosis_failed":
        return [Section(strings.VIEW_DIAGNOSIS_FAILED.format(
            reason="; ".join(findings) or "no answer from the host"))]
    if state == "no_action":
        return [Section(strings.VIEW_NO_ACTION.format(found="; ".join(findings)) if findings
                        else strings.VIEW_NO_ACTION_BARE)]
    if state == "action_failed":
        summary = last.summary if last is not None else ""
        result = last.result if last is not None else None
        if led:
            return [Section(strings.VIEW_NEXT_STEP, code=failure_evidence(result) or None)]
        return [Section(strings.VIEW_ACTION_FAILED.format(
            what=escape(in_gib(summary) or "the last action")),
            code=failure_evidence(result) or None)]
    return []


def failure_evidence(result: ActionResult | None) -> str:
    """The failed action's commands and verification, as captured (host text: code block)."""
    if result is None:
        return ""
    lines = []
    for c in result.commands:
        if not c.ran:  # its effect already held: it never ran
            continue
        lines.append(f"$ {c.command or '?'}  → {transcript_status(c)}")
        err = str(c.stderr or c.error or "").strip()
        if err:
            lines.append(f"  {err[:300]}")
    if result.verification is not None and result.verification.detail:
        lines.append(f"verify: {in_gib(result.verification.detail)}")  # the message's units
    return "\n".join(lines)


def status_lines(marks: Marks) -> tuple[str, ...]:
    """Small lines: running, acknowledged, snoozed, escalated, resolved by a person."""
    lines = []
    if marks.running is not None:
        said = marks.running.said or escape(marks.running.kind)  # its words (escaped)
        lines.append(strings.VIEW_RUNNING.format(who=mention(marks.running.by), kind=said))
    for who, text in ((marks.acked_by, strings.VIEW_ACKED),
                      (marks.escalated_by, strings.VIEW_ESCALATED),
                      (marks.resolved_by, strings.VIEW_RESOLVED_BY)):
        if who:
            lines.append(text.format(who=mention(who)))
    if marks.snooze is not None:
        until = time.strftime("%Y-%m-%d %H:%M", time.gmtime(marks.snooze.until))
        lines.append(strings.VIEW_SNOOZED.format(who=mention(marks.snooze.by), until=until))
    return tuple(lines)
