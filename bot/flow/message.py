"""The incident's one voice in chat: render the message from Redis and post or edit it,
and post replies in its thread, all through the durable outbox.

Every post and every edit of the incident message goes through ``Publisher.publish``. It
takes the next render sequence number *before* reading the stored state, so a higher
number never shows an older state; the outbox and the Slack backend drop a render older
than the last applied one. Nothing is rendered from a click's payload.

Every post goes through ``bot/chat/outbox.py``: delivered at once when Slack takes it,
else kept in Redis and retried (5xx, 429, timeouts) in order per incident, never twice.
The card's place (``Incident.chat``) and its approvals' message are recorded when it is
delivered, whichever replica or retry delivers it: the outbox reports the delivery and
the flow handles it as an event (``bot/flow/delivery.py``, ``CardDelivered``).

The message is posted when the diagnosis starts (issue 29): before there is a diagnosis it
renders as the alert card (``bot.chat.alert_card``: what fired, "diagnosing…"), and the
diagnosis edits the same message into the full card, its evidence going to the thread then.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping

from bot.chat.alert_card import render_alert_card
from bot.chat.base import ChatMessage, MessageRef
from bot.chat.evidence import raw_evidence, with_outputs
from bot.chat.outbox import CARD, ChatOutbox
from bot.chat.render import render_incident, thread_evidence
from bot.core import strings
from bot.domain.incident import Incident
from bot.domain.lifecycle import FIRST_DIAGNOSIS, IncidentState
from bot.flow.storm import Storms
from bot.flow.thread import message_ref, note, thread_ref
from storage.approvals import ApprovalStore
from storage.chat_outbox import Op
from storage.incidents import IncidentStore
from storage.renders import RenderLedger


class Publisher:
    """Renders stored incidents into ``chat``: the message, its evidence, thread replies."""

    def __init__(self, incidents: IncidentStore, approvals: ApprovalStore,
                 renders: RenderLedger, outbox: ChatOutbox, channel: str, *,
                 oncall: str | None = None, runbooks: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time, parent_wait_s: float = 15.0,
                 can_escalate: bool = True) -> None:
        self.incidents = incidents
        self.approvals = approvals
        self.renders = renders
        self.outbox = outbox
        self.channel = channel
        self.oncall = oncall
        self.runbooks = dict(runbooks or {})  # finding code -> runbook URL: link buttons
        self.clock = clock
        self.parent_wait_s = parent_wait_s
        # False when escalation has nowhere to go (``bot.schedule.escalation.resolve_target``
        # is None): the message then offers no Escalate button
        self.can_escalate = can_escalate
        # False: no card while an incident waits for a diagnosis worker (``announce``; the
        # behaviour before issue 29, which ``bench/first_message.py`` measures beside ours)
        self.early_cards = True
        # a burst of incidents as one message per kind (issue 37); None: every incident
        # gets its own message (``bot.flow.storm``; set by ``build_flow``)
        self.storms: Storms | None = None

    def render_stored(self, incident: Incident, seq: int = 0) -> ChatMessage | None:
        """The incident's message as its stored state says: the alert card while it has
        no diagnosis (being diagnosed, or past its diagnosis without one: the reconciler
        gave it up, the alert cleared); None while it still waits for its diagnosis to
        start and has no message."""
        # ages are as of the stored state's last change, never the render's clock: the same
        # state renders the same message on every replica and at every retry
        as_of = incident.updated or self.clock()
        if incident.diagnosis is None:
            if incident.state is IncidentState.OPEN and incident.chat is None:
                return None
            return render_alert_card(incident, seq=seq, now=as_of, oncall=self.oncall,
                                     can_escalate=self.can_escalate)
        plans, revert = list(incident.plans), incident.revert_plan
        ids = [p.approval_id for p in plans] + ([revert.approval_id] if revert else [])
        approvals = {i: a for i in ids if (a := self.approvals.get(i)) is not None}
        return render_incident(incident, incident.diagnosis, plans, approvals,
                               incident.results, revert, seq=seq, now=as_of, oncall=self.oncall,
                               runbooks=self.runbooks, can_escalate=self.can_escalate)

    def publish(self, incident_id: str, *, evidence: bool = False) -> MessageRef | None:
        """Post the incident's message the first time, edit it in place after that.
        ``evidence``: the diagnosis is shown for the first time on a message already
        posted (the alert card), so its evidence goes to the thread now (a first post
        always brings it)."""
        seq = self.renders.next_seq(incident_id)
        incident = self.incidents.require(incident_id)
        message = self.render_stored(incident, seq)
        if message is None:
            return None
        ref = message_ref(incident)
        if ref is None:
            if self._in_storm_waiting(incident):
                return None  # its row in the storm's table; its card once diagnosed
            return self._first_post(incident, message)
        if self.storms is not None:
            self.storms.touch(incident_id)
        # the thread it sits in goes with the edit: a card this incident took over (a
        # re-open after a data loss) may sit in a storm's thread, not its own
        sent = self.outbox.send(incident_id, CARD, Op.UPDATE, message, ref.channel, ref=ref,
                                thread=thread_ref(incident))
        if evidence:
            self._evidence(incident, ref.channel)
        return sent

    def announce(self, incident_id: str, *, card: bool = True) -> bool:
        """Queue the alert card of an incident still waiting for a diagnosis slot, without
        waiting on Slack (the event loop calls it): with more alerts than diagnosis
        workers, the ones queued get their message at Slack's pace, not after a hung
        probe elsewhere frees a worker. The diagnosis edits it. Only a top-level incident
        that has no message yet (a grouped child goes in its parent's thread, later).
        With storms on, every new incident (a grouped one too) is first placed: in a storm
        it gets no card of its own (``card`` False: placement only)."""
        if not (card and self.early_cards) and self.storms is None:
            return False
        incident = self.incidents.get(incident_id)
        if (incident is None or incident.state is not IncidentState.OPEN
                or incident.chat is not None or incident.diagnosis is not None):
            return False
        if self.storms is not None and self.storms.place(incident, self.channel) is not None:
            return True  # seen as a row of the storm's table (a grouped host too)
        if incident.parent_id or not (card and self.early_cards):
            return False
        message = render_alert_card(incident, seq=self.renders.next_seq(incident_id),
                                    now=incident.updated or self.clock(), oncall=self.oncall,
                                    can_escalate=self.can_escalate)
        look_for, look_since = _lost_card(incident)
        self.outbox.send(incident_id, CARD, Op.POST, message, self.channel, deliver=False,
                         look_for=look_for, look_since=look_since)
        return True

    def reply(self, incident: Incident, text: str, code: str | None = None, *,
              purpose: str = "") -> MessageRef | None:
        """A reply in the incident's thread (its group parent's, for a grouped host); the
        ref when delivered now. Before the card is delivered, it waits behind it. One
        ``purpose`` is one message: a second reply with it edits the first."""
        return self._in_thread(incident, note(text, code),
                               purpose or f"reply:{uuid.uuid4().hex[:12]}")

    def edit(self, incident: Incident, ref: MessageRef, text: str, purpose: str) -> None:
        """Edit a reply the flow keeps current (the extraction's progress line)."""
        self.outbox.send(incident.id, purpose, Op.UPDATE, note(text), ref.channel, ref=ref)

    def _in_thread(self, incident: Incident, message: ChatMessage,
                   purpose: str) -> MessageRef | None:
        ref = thread_ref(incident)
        if ref is not None:
            return self.outbox.send(incident.id, purpose, Op.POST, message, ref.channel,
                                    thread=ref)
        return self.outbox.send(incident.id, purpose, Op.POST, message, self.channel,
                                thread_of=CARD)

    def post_raw_evidence(self, incident_id: str) -> str:
        """Raw probe output on demand (button or ``/ir evidence``), as a reply in the
        thread; the answer for the person who asked."""
        incident = self.incidents.get(incident_id)
        if incident is None:
            return strings.INCIDENT_UNKNOWN.format(id=incident_id)
        if incident.diagnosis is None:
            return strings.MSG_EVIDENCE_NOT_YET.format(id=incident_id)
        ref = thread_ref(incident)
        if ref is None:
            return strings.MSG_EVIDENCE_NO_THREAD.format(id=incident_id)
        sections = raw_evidence(with_outputs(incident.diagnosis, incident.probe_output))
        text = sections[0].text if sections else strings.MSG_PROBE_NO_OUTPUT
        self._in_thread(incident, ChatMessage(text=text, sections=sections,
                                              incident_id=incident_id),
                        f"raw-evidence:{uuid.uuid4().hex[:12]}")
        return strings.MSG_EVIDENCE_POSTED.format(id=incident_id)

    def _first_post(self, incident: Incident, message: ChatMessage) -> MessageRef | None:
        """The card, then the per-GPU evidence table as the first reply under it. Both have
        fixed purposes: a second first post (the card still waiting) edits, never doubles."""
        in_storm = self.storms is not None and self.storms.storm_of(incident.id) is not None
        # a storm's member goes in the storm's thread (the outbox puts it there when sent)
        channel, parent_ref = (self.channel, None) if in_storm else self._where_to_post(incident)
        look_for, look_since = _lost_card(incident)
        ref = self.outbox.send(incident.id, CARD, Op.POST, message, channel, thread=parent_ref,
                               look_for=look_for, look_since=look_since)
        self._evidence(incident, channel)
        return ref

    def _evidence(self, incident: Incident, channel: str) -> None:
        """The per-GPU evidence table as a reply under the card (nothing before the
        diagnosis). Its purpose is fixed: a second one edits the first."""
        sections = thread_evidence(incident.diagnosis) if incident.diagnosis else ()
        if sections:
            self.outbox.send(incident.id, "evidence", Op.POST,
                             ChatMessage(text=sections[0].text, sections=sections), channel,
                             thread_of=CARD)

    def _in_storm_waiting(self, incident: Incident) -> bool:
        """Placed (now, or earlier) in a storm and waiting for its diagnosis: no alert card
        of its own, the storm's table shows it (``bot.flow.storm``). Past its diagnosis
        without one (the reconciler gave it up, the alert cleared meanwhile) it waits no
        more: its card goes in the storm's thread, or it never has one and its replies
        (the closing note) are dropped (chaos seed 4242, gpu-05 #21: INC-129)."""
        storm = self.storms.place(incident, self.channel) if self.storms is not None else None
        return storm is not None and incident.diagnosis is None and \
            incident.state in FIRST_DIAGNOSIS  # its first diagnosis still to come

    def _where_to_post(self, incident: Incident) -> tuple[str, MessageRef | None]:
        """A grouped child is posted in its parent's thread (one channel message per
        group); another replica may still be posting the parent, so wait a little."""
        if not incident.parent_id:
            return self.channel, None
        deadline = time.monotonic() + self.parent_wait_s
        while True:
            parent = self.incidents.get(incident.parent_id)
            ref = message_ref(parent) if parent is not None else None
            if ref is not None or time.monotonic() >= deadline:
                return (ref.channel, ref) if ref is not None else (self.channel, None)
            time.sleep(0.2)


def _lost_card(incident: Incident) -> tuple[str, float]:
    """The card post's lead to the card of the incident it re-opens after a data loss, if
    that one's ts was never recorded: the outbox edits it, if Slack has it, rather than
    post a second message for one alert (issue 39, INC-5837)."""
    lost = incident.lost_card
    return ("", 0.0) if lost is None else (lost.incident_id, lost.since)
