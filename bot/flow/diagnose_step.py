"""Step 1: an opened incident is diagnosed over SSH, stored, and posted with its buttons.

The outcome decides the state: no SSH session → ``diagnosis_failed`` (Retry); findings
but nothing the catalog can run → ``no_action`` (Resolve); proposed actions →
``awaiting_approval``; a healthy host → ``resolved``. The message is rendered from what
was stored (``bot.flow.message``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from bot.chat.evidence import kept_outputs
from bot.chat.render import evidence_hash
from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.flow.hosts import Hosts
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from storage.incidents import IncidentStore


def outcome_state(diagnosis: Diagnosis, n_plans: int) -> IncidentState:
    """Where a finished diagnosis leaves the incident (pure)."""
    if diagnosis.status is DiagnosisStatus.UNREACHABLE:
        return IncidentState.DIAGNOSIS_FAILED
    if n_plans:
        return IncidentState.AWAITING_APPROVAL
    return IncidentState.NO_ACTION if diagnosis.findings else IncidentState.RESOLVED


class Diagnoses(Protocol):
    """What Retry and ``/ir diag`` call: ``DiagnoseStep``, or it followed by the fleet
    policies' step (``bot.flow.policy_step.PolicedDiagnosis``)."""

    def on_opened(self, incident_id: str) -> Incident: ...


class DiagnoseStep:
    """opened → diagnosing → (diagnosis stored, plans created) → the state it calls for."""

    def __init__(self, incidents: IncidentStore, hosts: Hosts, plans: Plans,
                 publisher: Publisher, *, bot_user: str = "incident-bot") -> None:
        self.incidents = incidents
        self.hosts = hosts
        self.plans = plans
        self.publisher = publisher
        self.bot_user = bot_user

    def on_opened(self, incident_id: str) -> Incident:
        """Diagnose, store the findings and plans, post the message, wait for a person."""
        incident = self.incidents.transition(incident_id, IncidentState.DIAGNOSING,
                                             self.bot_user, "alert received")
        target = self.hosts.target_for(incident.host)
        diagnosis = self.hosts.diagnose(incident, target)
        plans = (self.plans.make_plans(incident, diagnosis, target)
                 if target is not None and diagnosis.status is not DiagnosisStatus.UNREACHABLE
                 else [])
        ev_hash = evidence_hash(diagnosis)
        self.incidents.update(incident_id, lambda i: replace(
            i, diagnosis=diagnosis, plans=tuple(plans), evidence_hash=ev_hash, results=(),
            last_outcome=None, revert_plan=None, running=None,
            probe_output=kept_outputs(diagnosis)))
        reason = f"{len(diagnosis.findings)} findings, {len(plans)} proposed actions"
        incident = self.incidents.transition(incident_id, outcome_state(diagnosis, len(plans)),
                                             self.bot_user, reason, ev_hash)
        self.publisher.publish(incident_id)
        return incident
