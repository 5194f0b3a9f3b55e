"""Step 1: an opened incident is diagnosed over SSH, stored, and posted with its buttons.

The outcome decides the state (``bot.domain.flow.outcome_state``): no SSH session →
``diagnosis_failed`` (Retry); findings but nothing the catalog can run → ``no_action``
(Resolve); proposed actions → ``awaiting_approval``; a healthy host → ``resolved``. The
message is rendered from what was stored (``bot.flow.message``).

The message goes out when the diagnosis starts (issue 29): a first diagnosis posts the
alert card at once (what fired, "diagnosing…"), so a host whose ``nvidia-smi`` hangs has
its message within seconds, not after the probe's deadline; the finished diagnosis (or the
failure) edits the same message, and its evidence goes to the thread then.

The decisions are ``bot.domain.flow.decide``'s, run by the flow runner; this module is the
diagnosis itself (``Diagnoser``: target, playbook, plans) and the entry point Retry,
``/ir diag`` and the consumer call (``DiagnoseStep.on_opened``), which hands the finished
diagnosis to the fleet policies (``bot.flow.policy_step.PolicyStep``) when it has them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from bot.chat.evidence import kept_outputs
from bot.domain.evidence import evidence_hash
from bot.domain.findings import DiagnosisStatus
from bot.domain.flow import AlertOpened, DiagnosisFinished, RetryAsked, decide
from bot.domain.flow import outcome_state as outcome_state
from bot.domain.incident import Incident
from bot.domain.lifecycle import FIRST_DIAGNOSIS, IncidentState
from bot.flow.hosts import Hosts
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.flow.repeat_watch import RepeatWatch
from bot.flow.runner import FlowRunner


class Diagnoses(Protocol):
    """What the consumer, Retry and ``/ir diag`` call: ``DiagnoseStep``."""

    def on_opened(self, incident_id: str,
                  only_from: frozenset[IncidentState] | None = None) -> Incident: ...


class Policies(Protocol):
    """What the fleet policies do with a finished diagnosis
    (``bot.flow.policy_step.PolicyStep``: run an ``auto`` proposal, say the others)."""

    def after_diagnosis(self, incident_id: str) -> None: ...


class Diagnoser:
    """The diagnosis for the runner: the playbook over SSH, the plans made from its
    proposals (each a pending approval), and the message it will show rendered once (a
    render that fails here fails the diagnosis, before anything is stored)."""

    def __init__(self, hosts: Hosts, plans: Plans, publisher: Publisher, *,
                 bot_user: str = "incident-bot", clock: Callable[[], float] = time.time,
                 repeats: RepeatWatch | None = None) -> None:
        self.hosts = hosts
        self.plans = plans
        self.publisher = publisher
        self.bot_user = bot_user
        self.clock = clock
        self.repeats = repeats  # a fault back after a passed gate: RMA (issue 36)

    def run(self, incident: Incident, evidence: bool) -> DiagnosisFinished:
        target = self.hosts.target_for(incident.host)
        diagnosis = self.hosts.diagnose(incident, target)
        if self.repeats is not None and diagnosis.status is not DiagnosisStatus.UNREACHABLE:
            diagnosis = self.repeats.check(incident, diagnosis)
        plans = (self.plans.make_plans(incident, diagnosis, target)
                 if target is not None and diagnosis.status is not DiagnosisStatus.UNREACHABLE
                 else [])
        finished = DiagnosisFinished(self.clock(), self.bot_user, diagnosis, tuple(plans),
                                     evidence_hash(diagnosis), kept_outputs(diagnosis),
                                     evidence)
        would_be, _ = decide(incident, finished)
        self.publisher.render_stored(would_be)
        return finished


class DiagnoseStep:
    """opened → diagnosing → (diagnosis stored, plans created) → the state it calls for,
    then what the fleet policies run or say about it."""

    def __init__(self, flow_runner: FlowRunner, *, policies: Policies | None = None,
                 bot_user: str = "incident-bot", alert_card: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        self.flow_runner = flow_runner
        # every path that diagnoses from the consumer, Retry or ``/ir diag`` has them, so
        # an ``auto`` proposal never waits unclaimed and unexplained after its host was
        # counted against the limit; None: no policies (or the reboot step's re-diagnosis)
        self.policies = policies
        self.bot_user = bot_user
        # False: no message until the diagnosis ends (the behaviour before issue 29; the
        # benchmark ``bench/first_message.py`` measures both)
        self.alert_card = alert_card
        self.clock = clock

    def on_opened(self, incident_id: str,
                  only_from: frozenset[IncidentState] | None = None) -> Incident:
        """Diagnose, store the findings and plans, post the message, then the policies
        (an ``auto`` proposal run, the others' notes); else wait for a person.

        ``only_from=FIRST_DIAGNOSIS``: the first diagnosis (the consumer, ``/ir diag``): a
        duplicate delivery or a diagnosis another replica owns raises ``StepTaken``
        (storage's claim on the step). None: diagnose again from wherever the state table
        allows (Retry, a host back from a reboot)."""
        if only_from is not None and only_from != FIRST_DIAGNOSIS:
            raise ValueError("only_from is FIRST_DIAGNOSIS or None")
        kind = AlertOpened if only_from is not None else RetryAsked
        event = kind(self.clock(), self.bot_user, alert_card=self.alert_card)
        incident = self.flow_runner.handle(incident_id, event).incident
        if self.policies is not None:
            self.policies.after_diagnosis(incident_id)
        return incident
