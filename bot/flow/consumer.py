"""The flow's event loop: consume incident events from Redis and run the matching step.

A consumer group on the events stream means each event is handled by one replica; an
entry a dead replica read and never acknowledged is claimed by another after a while.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading

from bot.core.errors import log_internal
from bot.domain.lifecycle import FIRST_DIAGNOSIS, StepTaken
from bot.flow.context import FlowContext
from bot.flow.diagnose_step import on_incident_opened
from bot.flow.message import publish
from storage.events import IncidentEvents

log = logging.getLogger(__name__)
GROUP = "flow"
STALE_MS = 120_000


def consumer_name() -> str:
    """Unique per consumer loop, not per process: two replicas in one process (tests, an
    embedded demo) must not read each other's pending entries as their own."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


def handle(ctx: FlowContext, event: dict[str, str]) -> None:
    kind, incident_id = event.get("type", ""), event.get("incident_id", "")
    try:
        if kind == "incident.opened":  # also what the reconciler sends to re-drive one
            on_incident_opened(ctx, incident_id, only_from=FIRST_DIAGNOSIS)
        elif kind == "incident.grouped":
            publish(ctx, incident_id)  # the parent's host list grew
            # the new host: diagnosed, in the thread
            on_incident_opened(ctx, event["child"], only_from=FIRST_DIAGNOSIS)
        elif kind == "incident.resolved":
            publish(ctx, incident_id)
    except StepTaken as taken:  # a duplicate or late delivery: someone else has it
        log.info("flow event skipped: %s", taken)


def run_once(ctx: FlowContext, events: IncidentEvents, consumer: str,
             block_ms: int | None = 1000) -> int:
    """Handle what is waiting (own pending first, then stale, then new); returns count."""
    batch = (events.pending(GROUP, consumer) or events.claim_stale(GROUP, consumer, STALE_MS)
             or events.consume(GROUP, consumer, block_ms=block_ms))
    for entry_id, event in batch:
        try:
            handle(ctx, event)
        except Exception as exc:  # one bad incident must not stop the loop
            log_internal(exc, f"flow event {entry_id}")
        events.ack(GROUP, entry_id)
    return len(batch)


def run_forever(ctx: FlowContext, stop: threading.Event) -> None:
    events = IncidentEvents(ctx.redis)
    consumer = consumer_name()
    while not stop.is_set():
        try:
            run_once(ctx, events, consumer)
        except Exception as exc:  # Redis blip: log, wait, go on
            log_internal(exc, "flow consumer")
            stop.wait(1.0)
