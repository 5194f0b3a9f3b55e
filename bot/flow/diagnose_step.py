"""Step 1: an opened incident is diagnosed over SSH, stored, and posted with its buttons.

The outcome decides the state: no SSH session → ``diagnosis_failed`` (Retry); findings
but nothing the catalog can run → ``no_action`` (Resolve); proposed actions →
``awaiting_approval``; a healthy host → ``resolved``. The message is rendered from what
was stored (``bot.flow.message``).
"""

from __future__ import annotations

import time
from dataclasses import replace

from bot.chat.evidence import kept_outputs
from bot.chat.render import evidence_hash
from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.flow.context import FlowContext
from bot.flow.hosts import diagnose, target_for
from bot.flow.message import publish
from bot.flow.plans import make_plans


def outcome_state(diagnosis: Diagnosis, n_plans: int) -> IncidentState:
    """Where a finished diagnosis leaves the incident (pure)."""
    if diagnosis.status is DiagnosisStatus.UNREACHABLE:
        return IncidentState.DIAGNOSIS_FAILED
    if n_plans:
        return IncidentState.AWAITING_APPROVAL
    return IncidentState.NO_ACTION if diagnosis.findings else IncidentState.RESOLVED


def on_incident_opened(ctx: FlowContext, incident_id: str,
                       only_from: frozenset[IncidentState] | None = None) -> Incident:
    """Diagnose, store the findings and plans, post the message, wait for a person.
    ``only_from``: a delivered event diagnoses only an incident still waiting for its
    first diagnosis (``StepTaken`` otherwise); re-entering ``diagnosing`` is a re-drive."""
    started = time.monotonic()
    incident = ctx.incidents.transition(incident_id, IncidentState.DIAGNOSING, ctx.bot_user,
                                        "alert received", only_from=only_from)
    target = target_for(ctx, incident.host)
    diagnosis, _ = diagnose(ctx, incident, target)
    plans = (make_plans(ctx, incident, diagnosis, target)
             if target is not None and diagnosis.status is not DiagnosisStatus.UNREACHABLE else [])
    ev_hash = evidence_hash(diagnosis)
    ctx.incidents.update(incident_id, lambda i: replace(
        i, diagnosis=diagnosis, plans=tuple(plans), evidence_hash=ev_hash, results=(),
        last_outcome=None, revert_plan=None, running=None,
        probe_output=kept_outputs(diagnosis)))
    reason = f"{len(diagnosis.findings)} findings, {len(plans)} proposed actions"
    incident = ctx.incidents.transition(incident_id, outcome_state(diagnosis, len(plans)),
                                        ctx.bot_user, reason, ev_hash)
    publish(ctx, incident_id)
    ctx.notes.append(f"diagnosed {incident.host} ({diagnosis.playbook}) in "
                     f"{diagnosis.duration_s:.2f}s; posted in {time.monotonic() - started:.2f}s")
    return incident
