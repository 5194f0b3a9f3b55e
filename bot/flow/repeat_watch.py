"""Repeat offenders in the flow: every diagnosis's hardware faults are kept per node, and a
fault back within the window after a passed health gate sends the node to RMA.

``check`` runs right after a diagnosis (the diagnose step): the pure rule
(``bot/domain/repeat.py``) over the node's history (``storage/health_history.py``); an
offence puts the node on the RMA list (the digest lists it, every later gate keeps it out:
``Followups.gate``), is audited, and the diagnosis gains a finding that says so and the
RMA hand-off's proposal (``RmaHandoff``; after a Slurm drain, which still goes first).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from bot.core import fmt, strings
from bot.domain.findings import Diagnosis, Finding, ProposedAction, Severity
from bot.domain.incident import Incident
from bot.domain.repeat import WEEK_S, FaultSeen, RepeatOffence, faults_of, offence
from bot.remediation.actions import find
from bot.remediation.actions.rma import rma_action
from storage.audit import AuditLog
from storage.health_history import HealthHistory


class RepeatWatch:
    def __init__(self, history: HealthHistory, audit: AuditLog, *, window_s: float = WEEK_S,
                 clock: Callable[[], float] = time.time, bot_user: str = "incident-bot") -> None:
        self.history = history
        self.audit = audit
        self.window_s = window_s
        self.clock = clock
        self.bot_user = bot_user

    def check(self, incident: Incident, diagnosis: Diagnosis) -> Diagnosis:
        """Keep the diagnosis's hardware faults; the diagnosis with the RMA proposal when
        one of them came back after a passed gate."""
        faults = faults_of(diagnosis)
        if not faults:
            return diagnosis
        host, now = incident.host, self.clock()
        found = offence(host, faults, self.history.faults(host), self.history.passes(host), now,
                        incident.id, self.window_s)
        self.history.record_faults(host, [FaultSeen(k, now, incident.id, t[:300])
                                          for k, t in faults.items()])
        if found is None:
            return diagnosis
        self.history.send_to_rma(found)
        self.audit.append(incident.id, self.bot_user, "health.repeat_offender", found.to_json())
        return with_rma(diagnosis, found)


def with_rma(diagnosis: Diagnosis, found: RepeatOffence) -> Diagnosis:
    """The finding that names the repeat and the RMA hand-off's proposal, after a drain
    (which still goes first: no new job lands on the node)."""
    title = strings.RMA_FINDING.format(
        host=found.host, title=found.title, after=fmt.duration(found.again_at - found.passed_at),
        before=found.before or "an earlier incident")
    finding = Finding("node.repeat_offender", Severity.CRITICAL, title,
                      evidence={"offence": found.to_json()})
    action = rma_action(found.host, found.now)
    actions = list(diagnosis.actions)
    at = next((i + 1 for i, a in reversed(list(enumerate(actions))) if _drains(a)), 0)
    actions.insert(at, action)
    return replace(diagnosis, findings=(*diagnosis.findings, finding), actions=tuple(actions))


def _drains(action: ProposedAction) -> bool:
    known = find(action.kind)
    return known is not None and known.drains
