"""Proposals the catalog can plan for a host, and nothing else.

A diagnosis may suggest an action whose parameters the catalog refuses (a path outside
the grammar, an index out of range). Such a proposal is never a reason the diagnosis
fails: it is dropped and said as an info finding, so the incident still gets its
message with what can be done.
"""

from __future__ import annotations

from dataclasses import replace

from bot.core import strings
from bot.domain.findings import Diagnosis, Finding, ProposedAction, Severity
from bot.remediation import catalog
from bot.ssh.base import SSHTarget

REFUSED_CODE = "plan.not_proposed"


def refusal(action: ProposedAction, target: SSHTarget | None) -> str | None:
    """Why the catalog would refuse to plan ``action`` on ``target``; None when it plans it."""
    try:
        catalog.plan(action.kind, action.params, target)
    except catalog.ActionRefused as exc:
        return exc.message
    return None


def plannable(diagnosis: Diagnosis, target: SSHTarget | None) -> Diagnosis:
    """``diagnosis`` without the proposals the catalog refuses, each named in an info finding."""
    kept: list[ProposedAction] = []
    notes: list[Finding] = []
    for action in diagnosis.actions:
        why = refusal(action, target)
        if why is None:
            kept.append(action)
            continue
        notes.append(Finding(REFUSED_CODE, Severity.INFO, strings.PLAN_NOT_PROPOSED.format(
            kind=action.kind, why=why[:300]), evidence={"kind": action.kind, "id": action.id}))
    if not notes:
        return diagnosis
    return replace(diagnosis, actions=tuple(kept), findings=(*diagnosis.findings, *notes))
