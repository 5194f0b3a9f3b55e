"""Step 1: an opened incident is diagnosed over SSH, stored, and posted with its buttons.

The outcome decides the state: no SSH session → ``diagnosis_failed`` (Retry); findings
but nothing the catalog can run → ``no_action`` (Resolve); proposed actions →
``awaiting_approval``; a healthy host → ``resolved``. The message is rendered from what
was stored (``bot.flow.message``).

The message goes out when the diagnosis starts (issue 29): a first diagnosis posts the
alert card at once (what fired, "diagnosing…"), so a host whose ``nvidia-smi`` hangs has
its message within seconds, not after the probe's deadline; the finished diagnosis (or the
failure) edits the same message, and its evidence goes to the thread then.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from bot.chat.evidence import kept_outputs
from bot.chat.render import evidence_hash
from bot.core import strings
from bot.core.errors import log_internal
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.incident import Incident
from bot.domain.kinds import playbook_for
from bot.domain.lifecycle import IllegalTransition, IncidentState, can_transition
from bot.flow.hosts import Hosts
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.flow.repeat_watch import RepeatWatch
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

    def on_opened(self, incident_id: str,
                  only_from: frozenset[IncidentState] | None = None) -> Incident: ...


class DiagnoseStep:
    """opened → diagnosing → (diagnosis stored, plans created) → the state it calls for."""

    def __init__(self, incidents: IncidentStore, hosts: Hosts, plans: Plans,
                 publisher: Publisher, *, bot_user: str = "incident-bot",
                 alert_card: bool = True, repeats: RepeatWatch | None = None) -> None:
        self.incidents = incidents
        self.hosts = hosts
        self.plans = plans
        self.publisher = publisher
        self.bot_user = bot_user
        # False: no message until the diagnosis ends (the behaviour before issue 29; the
        # benchmark ``bench/first_message.py`` measures both)
        self.alert_card = alert_card
        self.repeats = repeats  # a fault back after a passed gate: RMA (issue 36)

    def on_opened(self, incident_id: str,
                  only_from: frozenset[IncidentState] | None = None) -> Incident:
        """Diagnose, store the findings and plans, post the message, wait for a person.

        Never silent: an error of ours in any step after the incident moved to
        ``diagnosing`` (target, probes, planning, rendering) leaves it
        ``diagnosis_failed`` with the error id and a Retry button, and says so.
        ``only_from``: the states a first diagnosis starts from (a duplicate delivery or a
        diagnosis another replica owns raises ``StepTaken``: storage's claim on the step)."""
        incident = self.incidents.transition(incident_id, IncidentState.DIAGNOSING,
                                             self.bot_user, "alert received",
                                             only_from=only_from)
        first = self.alert_card and incident.diagnosis is None
        if first:
            self._post_alert_card(incident_id)
        try:
            return self._diagnose(incident, evidence=first)
        except Exception as exc:
            error_id = log_internal(exc, f"diagnosis of {incident_id}")
            return self._failed(incident_id, error_id)

    def _post_alert_card(self, incident_id: str) -> None:
        """The message now, with what is known: the alert. A failure here is logged and the
        diagnosis goes on (its outcome posts the message then)."""
        try:
            self.publisher.publish(incident_id)
        except Exception as exc:
            log_internal(exc, f"the alert card of {incident_id}")

    def _diagnose(self, incident: Incident, *, evidence: bool = False) -> Incident:
        incident_id = incident.id
        target = self.hosts.target_for(incident.host)
        diagnosis = self.hosts.diagnose(incident, target)
        if self.repeats is not None and diagnosis.status is not DiagnosisStatus.UNREACHABLE:
            diagnosis = self.repeats.check(incident, diagnosis)
        plans = (self.plans.make_plans(incident, diagnosis, target)
                 if target is not None and diagnosis.status is not DiagnosisStatus.UNREACHABLE
                 else [])
        ev_hash = evidence_hash(diagnosis)
        stored = self.incidents.update(incident_id, lambda i: replace(
            i, diagnosis=diagnosis, plans=tuple(plans), evidence_hash=ev_hash, results=(),
            last_outcome=None, revert_plan=None, running=None,
            probe_output=kept_outputs(diagnosis)))
        outcome = outcome_state(diagnosis, len(plans))
        self.publisher.render_stored(replace(stored, state=outcome))  # renders, or fails here
        reason = f"{len(diagnosis.findings)} findings, {len(plans)} proposed actions"
        incident = self.incidents.transition(incident_id, outcome, self.bot_user, reason, ev_hash)
        self.publisher.publish(incident_id, evidence=evidence)
        return incident

    def _failed(self, incident_id: str, error_id: str) -> Incident:
        """The incident as ``diagnosis_failed`` naming the error id, its message posted."""
        current = self.incidents.require(incident_id)
        title = strings.FLOW_DIAGNOSIS_ERROR.format(error_id=error_id)
        failed = Diagnosis(current.host, playbook_for(current.kind), DiagnosisStatus.UNREACHABLE,
                           0.0, (Finding("bot.internal_error", Severity.WARNING, title),))
        self.plans.withdraw_pending(current, self.bot_user, reason="diagnosis failed")
        self.incidents.update(incident_id, lambda i: replace(
            i, diagnosis=failed, plans=(), results=(), running=None))
        if can_transition(current.state, IncidentState.DIAGNOSIS_FAILED):
            try:
                current = self.incidents.transition(incident_id, IncidentState.DIAGNOSIS_FAILED,
                                                    self.bot_user, title)
            except IllegalTransition:  # another step settled it meanwhile
                current = self.incidents.require(incident_id)
        self.publisher.publish(incident_id)
        return current
