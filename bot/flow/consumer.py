"""The flow's event loop: consume incident events from Redis and run the matching step.

A consumer group on the events stream means each event is handled by one replica; an
entry a dead replica read and never acknowledged is claimed by another after a while.

When Redis refuses a step's write (out of memory, read-only, loading…), the event is not
a bug: a diagnosis it cut short is handed to the reconciler (``CutShort``: re-driven
within one period of Redis taking writes again) and acknowledged; any other event stays
pending and is handled again, no sooner than its back-off. Each pass of the loop is a
heartbeat (``/readyz``).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

from bot.core import metrics
from bot.core.errors import log_internal
from bot.core.heartbeat import Heartbeats
from bot.domain.flow import AlertCleared, HostGrouped, XidsFolded
from bot.domain.lifecycle import FIRST_DIAGNOSIS, StepTaken
from bot.flow.clicks import Clicks
from bot.flow.diagnose_step import Diagnoses
from bot.flow.message import Publisher
from bot.flow.reconcile import CutShort
from bot.flow.runner import FlowRunner
from storage.connection import refusal
from storage.events import CLICK, IncidentEvents
from storage.incidents import UnknownIncident

log = logging.getLogger(__name__)
GROUP = "flow"
STALE_MS = 120_000
# resolved (its closing note), or its alert cleared while it stays open (a hardware fault)
CLEARED = frozenset({"incident.resolved", "incident.alert_cleared"})
LOOP = "consumer"  # its name in ``Heartbeats``
RETRY_S, MAX_RETRY_S = 1.0, 8.0  # a refused event's back-off before it is handled again
REFUSED_QUIET_S = 3.0  # a pass counts as progress only this long after a refused step


def consumer_name() -> str:
    """Unique per consumer loop, not per process: two replicas in one process (tests, an
    embedded demo) must not read each other's pending entries as their own."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


class Consumer:
    """One consumer of the events stream: an event in, the step it calls for run."""

    def __init__(self, events: IncidentEvents, diagnose: Diagnoses, publisher: Publisher,
                 flow_runner: FlowRunner | None = None,
                 diagnoses: Executor | None = None, workers: int = 0, *,
                 clicks: Clicks | None = None, bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time) -> None:
        self.events = events
        # events are handled here, a few at once: one host's hung probe never holds another
        # host's message (None: inline, in the order they came)
        self.diagnoses = diagnoses
        self._busy: set[str] = set()  # entry ids being handled off this loop
        self.workers = workers  # the executor's size: an event beyond it waits for a worker
        self.diagnose = diagnose  # the diagnosis, then what the fleet policies run on it
        self.publisher = publisher
        self.flow_runner = flow_runner  # a resolved incident: re-rendered, its closing note
        self.clicks = clicks  # people's decisions in chat (issue 34: the desk queues them)
        self.bot_user = bot_user
        self.clock = clock
        self.name = consumer_name()
        self.interrupted: CutShort | None = None  # diagnoses a refusal cut short
        self.heartbeats: Heartbeats | None = None
        self._retry: dict[str, tuple[float, float]] = {}  # entry id → (not before, back-off)
        self._refused_at = 0.0  # when a step was last refused: no heartbeat for a while

    def handle(self, event: dict[str, str]) -> None:
        kind, incident_id = event.get("type", ""), event.get("incident_id", "")
        try:
            if kind == "incident.opened":  # also what the reconciler sends to re-drive one
                self._diagnose(incident_id)
            elif kind == "incident.grouped":
                if self.flow_runner is not None:  # the parent's host list grew
                    self.flow_runner.handle(incident_id, HostGrouped(
                        self.clock(), self.bot_user, event["child"]))
                self._diagnose(event["child"])  # the new host: diagnosed, in the thread
            elif kind in CLEARED and self.flow_runner is not None:
                self.flow_runner.handle(incident_id, AlertCleared(self.clock(), self.bot_user))
            elif kind == "incident.folded" and self.flow_runner is not None:
                # an Xid storm's count, edited on its message (other folds say nothing new)
                self.flow_runner.handle(incident_id, XidsFolded(self.clock(), self.bot_user))
            elif kind.startswith(CLICK) and self.clicks is not None:
                self.clicks.handle(event)  # an approval claimed, denied, expired; a verb
        except StepTaken as taken:  # a duplicate or late delivery: someone else has it
            log.info("flow event skipped: %s", taken)

    def _diagnose(self, incident_id: str) -> None:
        self.diagnose.on_opened(incident_id, only_from=FIRST_DIAGNOSIS)

    def run_once(self, block_ms: int | None = 1000) -> int:
        """Handle what is waiting (own pending first, then stale, then new); returns count.

        With an executor each event is handled there and acked when its step is done, so an
        event whose step failed because Redis went away stays pending and is handled again
        once it is back; entries still being handled are not picked up twice."""
        events = self.events
        now = time.monotonic()
        pending = [e for e in events.pending(GROUP, self.name) if e[0] not in self._busy
                   and self._retry.get(e[0], (0.0, 0.0))[0] <= now]
        batch = (pending or events.claim_stale(GROUP, self.name, STALE_MS)
                 or events.consume(GROUP, self.name, block_ms=block_ms))
        for entry_id, event in batch:
            if self.diagnoses is None:
                self._handle_and_ack(entry_id, event)
            elif entry_id not in self._busy:
                self._busy.add(entry_id)
                # placed in a storm at once (issue 37); waiting for a worker: its card now
                self._announce(event, card=len(self._busy) > self.workers)
                self.diagnoses.submit(self._handle_and_ack, entry_id, event)
        return len(batch)

    def drain(self) -> int:
        """Handle what the stream holds now and what that led to, then return (inline:
        no executor). A turn of the loop for the demo, which reads a person's line between
        turns, and for tests; the service runs ``run_forever``."""
        total = 0
        while handled := self.run_once(block_ms=None):
            total += handled
        return total

    def _announce(self, event: dict[str, str], *, card: bool) -> None:
        """A new incident's place in a storm decided as its event is read (issue 37: its
        row is where it is seen, whoever diagnoses it when); with ``card``, an opened
        incident's alert card queued now, before it waits for a diagnosis worker
        (``Publisher.announce``). A failure only loses the early card."""
        kind = event.get("type")
        incident_id = event.get("child", "") if kind == "incident.grouped" else (
            event.get("incident_id", "") if kind == "incident.opened" else "")
        if not incident_id:
            return
        try:
            self.publisher.announce(incident_id, card=card)
        except Exception as exc:
            if (why := refusal(exc)) is None:
                log_internal(exc, f"the early alert card of {incident_id}")
                return
            # Redis said "not now" (chaos seed 4242: OOM as a restarted Redis was sent the
            # storm's script): the placement and the card come with the diagnosis
            metrics.refused(why, LOOP)
            log.warning("the early alert card of %s: Redis refused (%s); it goes out with "
                        "the diagnosis", incident_id, why)

    def _handle_and_ack(self, entry_id: str, event: dict[str, str]) -> None:
        if self.interrupted is not None and _diagnosis(event):
            # handled here again (a pending entry): the reconciler must not re-drive it too
            self.interrupted.discard(_diagnosed(event))
        try:
            try:
                self.handle(event)
            except Exception as exc:  # one bad incident must not stop the loop
                if isinstance(exc, UnknownIncident):  # gone with Redis's data: said in chat
                    log.warning("flow event %s: incident %s is gone from Redis", entry_id,
                                event.get("incident_id"))
                elif not self._refused(entry_id, event, exc):
                    log_internal(exc, f"flow event {entry_id}")
                elif not _diagnosis(event):
                    return  # stays pending: handled again after its back-off
            self._retry.pop(entry_id, None)
            self.events.ack(GROUP, entry_id)
        except Exception as exc:  # Redis away: the entry stays pending for the next look
            if self.diagnoses is None:
                raise
            if refusal(exc) is None:
                log_internal(exc, f"ack of flow event {entry_id}")
        finally:
            self._busy.discard(entry_id)

    def _refused(self, entry_id: str, event: dict[str, str], exc: BaseException) -> bool:
        """A step Redis would not let finish: counted, the loop marked failing, a diagnosis
        handed to the reconciler, the event's back-off doubled; False for anything else."""
        why = refusal(exc)
        if why is None:
            return False
        metrics.refused(why, LOOP)
        log.warning("flow event %s (%s %s) cut short, Redis refused (%s): %s", entry_id,
                    event.get("type"), event.get("incident_id"), why, exc)
        self._refused_at = time.monotonic()
        if self.heartbeats is not None:
            self.heartbeats.failed(LOOP, f"Redis refused a step: {why}")
        if self.interrupted is not None and _diagnosis(event):
            self.interrupted.add(_diagnosed(event), why)
        backoff = min(MAX_RETRY_S, self._retry.get(entry_id, (0.0, RETRY_S / 2))[1] * 2)
        self._retry[entry_id] = (time.monotonic() + backoff, backoff)
        return True

    def run_forever(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.run_once()
                if self.heartbeats is not None and \
                        time.monotonic() - self._refused_at > REFUSED_QUIET_S:
                    self.heartbeats.ok(LOOP)
            except Exception as exc:  # Redis blip: log, wait, go on
                why = refusal(exc)
                if why is None:
                    log_internal(exc, "flow consumer")
                else:
                    metrics.refused(why, LOOP)
                    log.warning("flow consumer: Redis refused (%s): %s", why, exc)
                if self.heartbeats is not None:
                    self.heartbeats.failed(LOOP, why or type(exc).__name__)
                stop.wait(1.0)


def _diagnosis(event: dict[str, str]) -> bool:
    """The event starts a diagnosis (an opened incident, a host joining a group)."""
    return event.get("type") in ("incident.opened", "incident.grouped")


def _diagnosed(event: dict[str, str]) -> str:
    """The incident a diagnosis event diagnoses (a joining host's own, for a group)."""
    return event.get("child") or event.get("incident_id", "")
