"""What the incident message shows for its state: the state's own note and its buttons (pure).

Buttons are a function of state (docs/incident-states.md): a person can only click what the
bot can still do. Incident-level buttons carry the incident id; Snooze also its duration.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from bot.chat.base import Button, ButtonStyle, Section
from bot.chat.text import escape, mention
from bot.core import strings

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
EVIDENCE_STATES = frozenset({"awaiting_approval", "diagnosis_failed", "no_action",
                             "action_failed", "denied", "expired", "verified"})
_LABEL = {"ack": "Ack", "resolve": "Resolve", "retry": "Retry", "escalate": "Escalate"}


def incident_buttons(state: str, incident_id: str, meta: Mapping[str, Any]) -> tuple[Button, ...]:
    """The incident-level buttons for ``state`` (none on resolved or while acting)."""
    out: list[Button] = []
    for verb in _BUTTONS.get(state, ()):
        if verb == "ack" and meta.get("acked"):
            continue
        if verb == "snooze":
            out += [Button(f"Snooze {label}", "incident_snooze", f"{incident_id}|{secs}")
                    for label, secs in SNOOZES]
            continue
        style = ButtonStyle.PRIMARY if verb == "retry" else ButtonStyle.DEFAULT
        out.append(Button(_LABEL[verb], f"incident_{verb}", incident_id, style))
    return tuple(out)


def state_sections(state: str, meta: Mapping[str, Any], findings: list[str]) -> list[Section]:
    """The state's own note: why the diagnosis failed, what nothing-to-do found, what failed."""
    if state == "diagnosis_failed":
        return [Section(strings.VIEW_DIAGNOSIS_FAILED.format(
            reason=escape("; ".join(findings) or "no answer from the host")))]
    if state == "no_action":
        return [Section(strings.VIEW_NO_ACTION.format(
            found=escape("; ".join(findings) or "no findings")))]
    if state == "action_failed":
        result = meta.get("result") or {}
        return [Section(strings.VIEW_ACTION_FAILED.format(
            what=escape(str(result.get("summary") or "the last action"))),
            code=failure_evidence(result) or None)]
    return []


def failure_evidence(result: Mapping[str, Any]) -> str:
    """The failed action's commands and verification, as captured (host text: code block)."""
    lines = []
    for c in result.get("commands") or []:
        timed = " (timed out)" if c.get("timed_out") else ""
        lines.append(f"$ {c.get('command', '?')}  → exit {c.get('exit_status')}{timed}")
        err = str(c.get("stderr") or c.get("error") or "").strip()
        if err:
            lines.append(f"  {err[:300]}")
    verification = result.get("verification") or {}
    if verification.get("detail"):
        lines.append(f"verify: {verification['detail']}")
    return "\n".join(lines)


def status_lines(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """Small lines: running, acknowledged, snoozed, escalated, resolved by a person."""
    lines = []
    running = meta.get("running")
    if running:
        lines.append(strings.VIEW_RUNNING.format(who=mention(str(running.get("by", ""))),
                                                 kind=escape(str(running.get("kind", "")))))
    for key, text in (("acked", strings.VIEW_ACKED), ("escalated", strings.VIEW_ESCALATED),
                      ("resolved_by", strings.VIEW_RESOLVED_BY)):
        if meta.get(key):
            lines.append(text.format(who=mention(str(meta[key]))))
    snooze = meta.get("snoozed")
    if snooze:
        until = time.strftime("%Y-%m-%d %H:%M", time.gmtime(float(snooze.get("until", 0))))
        lines.append(strings.VIEW_SNOOZED.format(who=mention(str(snooze.get("by", ""))),
                                                 until=until))
    return tuple(lines)
