"""Clicks from the events stream: what people decided in chat, applied by the flow.

The chat layer never calls the flow (issue 34). Its approval desk claims an approval
atomically and the claim's own script queues ``click.approved`` (or ``click.denied``,
``click.expired``; the expiry sweep's too) on the incident events stream; an incident
verb (Ack, Resolve, Snooze, Retry, Escalate) is queued as ``click.<verb>`` once the desk
checked who may. The consumer hands each event here, as it hands alerts to the runner.

The clicker heard at once what the desk knew at the claim ("Approved by … — running
now"); what only the flow knows is said here afterwards, privately to the clicker (an
ephemeral, where they clicked or in the incident's channel): an approval that ran nothing
because its incident moved on (the thread is told too, by the runner), an error of ours
with its id, and an incident verb's outcome ("acknowledged", "cannot be resolved: …").
"""

from __future__ import annotations

import logging

from bot.chat.base import ChatBackend, ChatSendError, Ephemeral
from bot.core import strings
from bot.core.errors import log_internal
from bot.domain.approval import Approval
from bot.domain.lifecycle import StepTaken
from bot.flow.approve_step import ApproveStep
from bot.flow.decide_step import DecideStep, Verb
from storage.approvals import ApprovalStore
from storage.connection import refusal
from storage.events import CLICK, CLICK_APPROVED, CLICK_DENIED, CLICK_EXPIRED
from storage.incidents import IncidentStore, UnknownIncident

log = logging.getLogger(__name__)


class Clicks:
    """One click event in, the approve or decide step it calls for run, the clicker told."""

    def __init__(self, approvals: ApprovalStore, incidents: IncidentStore, approve: ApproveStep,
                 decide: DecideStep, chat: ChatBackend, channel: str) -> None:
        self.approvals = approvals
        self.incidents = incidents
        self.approve = approve
        self.decide = decide
        self.chat = chat  # the private answers: every backend has ``ephemeral``
        self.channel = channel  # the incident channel, where an unknown incident is answered

    def handle(self, event: dict[str, str]) -> None:
        kind, user = event.get("type", ""), event.get("user", "")
        if kind in (CLICK_APPROVED, CLICK_DENIED, CLICK_EXPIRED):
            approval = self.approvals.get(event.get("approval_id", ""))
            if approval is None:  # gone with Redis's data, or past its retention
                log.warning("%s of approval %s: no such approval", kind, event.get("approval_id"))
            elif kind == CLICK_APPROVED:
                self._approved(approval, user)
            elif kind == CLICK_DENIED:
                self.approve.on_denied(approval, user, event.get("reason", ""))
            else:
                self.approve.on_expired(approval)
            return
        self._incident(kind.removeprefix(CLICK), event)

    def _approved(self, approval: Approval, user: str) -> None:
        """The claimed approval accepted and run; the clicker told if nothing ran."""
        try:
            not_run = self.approve.on_approved(approval, user)
        except (StepTaken, UnknownIncident):
            raise  # a duplicate delivery, or the incident gone with Redis: the consumer's
        except Exception as exc:
            if refusal(exc) is not None:
                raise  # Redis said "not now": the event stays pending, handled again
            error_id = log_internal(exc, "an approved click")
            not_run = strings.APPROVAL_FAILED.format(error_id=error_id)
        if not_run:
            self._tell(approval.incident_id, user, approval.channel, not_run)

    def _incident(self, verb: str, event: dict[str, str]) -> None:
        incident_id, user = event.get("incident_id", ""), event.get("user", "")
        try:
            asked = Verb(verb)
        except ValueError:
            log.warning("click.%s on %s by %s: not a verb of ours", verb, incident_id, user)
            return
        duration = event.get("duration_s", "0")
        text = self.decide.decide(asked, incident_id, user,
                                  int(duration) if duration.isdigit() else 0)
        if text:
            self._tell(incident_id, user, event.get("channel", ""), text)

    def _tell(self, incident_id: str, user: str, channel: str, text: str) -> None:
        """Privately to ``user``: where they clicked, else the incident's channel. A chat
        outage loses the answer (the message shows the state), it is not an error of ours."""
        if not user:
            return
        if not channel:
            incident = self.incidents.get(incident_id)
            chat = incident.chat if incident is not None else None
            channel = chat.channel if chat is not None else self.channel
        try:
            self.chat.ephemeral(Ephemeral(user=user, text=text, channel=channel,
                                          extra={"incident_id": incident_id}))
        except (ChatSendError, RuntimeError) as exc:  # RuntimeError: Slack's delivery error
            log.warning("could not tell %s privately: %s", user, exc)
