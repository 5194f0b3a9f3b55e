"""The paging loop: events in, outbox items queued, the outbox sent. ``tick()`` does one
round of each and never sleeps, so the scheduler, a thread or a test can drive it.

1. The events stream (its own consumer group, ``paging``): ``incident.ack`` queues an
   acknowledge (or, before any page, marks the incident never to page);
   ``incident.resolved`` queues a resolve.
   ``policy.breaker_tripped`` (the fleet circuit breaker stopped every automatic action,
   issue 28) triggers a page at once, whatever ``after_s`` and ``severities`` say: its
   dedup key is ``policy-breaker-<trip time>``, one PagerDuty alert per trip.
2. A scan of open incidents: one of a paged severity that nobody acked or acted on
   within ``after_s`` is triggered (once: the outbox's page state decides). A paged
   incident that is no longer open is resolved even if its event was missed; a breaker
   page is resolved once the breaker is closed again (its hour ran out, or a reset).
3. The outbox's due incidents: take the incident's lease, send its head item, then
   complete it, defer it (429: ``Retry-After``, else backoff; 5xx/timeout: backoff) or
   reject it (400: on the dead list, with PagerDuty's reason).

The incident record is read only in ``page_facts`` (one place to change with its shape).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.core import strings
from bot.domain.incident import Incident
from bot.domain.paging import (
    PERSON_ACTIONS,
    PageAction,
    PageItem,
    PagePayload,
    PagingPolicy,
    backoff_s,
    retry_after_s,
    should_trigger,
)
from bot.domain.policy import host_count, period_words
from bot.paging.client import EventSender, SendOutcome
from storage.audit import AuditLog
from storage.events import IncidentEvents
from storage.incidents import IncidentStore
from storage.leases import Lease
from storage.paging import PageOutbox
from storage.policy_limits import BREAKER_EVENT, PolicyLimits
from storage.stores import Stores

log = logging.getLogger(__name__)
GROUP = "paging"
STALE_MS = 60_000
_ACTIVE = (PageAction.TRIGGER.value, PageAction.ACKNOWLEDGE.value)
BREAKER_KEY = "policy-breaker"  # dedup keys of breaker pages: policy-breaker-<trip time>


@dataclass(frozen=True)
class PageFacts:
    """What paging reads of an incident, whatever the record's shape."""

    acked: bool
    findings: tuple[str, ...]
    permalink: str


def page_facts(incident: Incident) -> PageFacts:
    """The one reader of the incident's flow fields."""
    diagnosis = incident.diagnosis
    findings = tuple(f"{f.severity.value} {f.code}: {f.title}"
                     for f in (diagnosis.findings if diagnosis is not None else ()))
    return PageFacts(acked=bool(incident.acked_by), findings=findings,
                     permalink=incident.chat.permalink if incident.chat else "")


def trigger_item(incident: Incident, facts: PageFacts, now: float) -> PageItem:
    details: dict[str, object] = {"incident": incident.id, "kind": incident.kind,
                                  "state": incident.state.value, "findings": list(facts.findings)}
    if facts.permalink:
        details["slack"] = facts.permalink
    payload = PagePayload(summary=f"{incident.id} {incident.summary or incident.kind}",
                          source=incident.host, severity=incident.severity.value,
                          custom_details=details)
    return PageItem(uuid.uuid4().hex, incident.id, PageAction.TRIGGER, now, payload)


def is_breaker_key(dedup_key: str) -> bool:
    return dedup_key.startswith(f"{BREAKER_KEY}-")


def breaker_item(event: dict[str, str], now: float) -> PageItem:
    """The page for one breaker trip (``storage/policy_limits.py``'s event fields)."""
    hosts = [h for h in event.get("hosts", "").split(",") if h]
    window_s = float(event.get("window_s") or 3600)
    summary = strings.POLICY_BREAKER_TRIPPED.format(
        host=event.get("host", "?"), policy=event.get("policy", "?"),
        n_hosts=host_count(len(hosts)), period=period_words(window_s),
        cap=event.get("cap", "?"))
    details: dict[str, object] = {"policy": event.get("policy", ""),
                                  "host": event.get("host", ""), "hosts": hosts,
                                  "cap": event.get("cap", ""), "window_s": window_s}
    payload = PagePayload(summary=summary, source="incident-bot", severity="critical",
                          custom_details=details)
    at = event.get("at") or str(int(now))
    return PageItem(uuid.uuid4().hex, f"{BREAKER_KEY}-{at}", PageAction.TRIGGER, now, payload)


@dataclass
class TickReport:
    events: int = 0
    queued: list[str] = field(default_factory=list)  # "trigger INC-3", ...
    sent: int = 0
    deferred: int = 0
    rejected: int = 0


@dataclass(frozen=True)
class PagingStores:
    """What the paging loop reads and writes, each store on the loop's clock."""

    incidents: IncidentStore
    audit: AuditLog
    events: IncidentEvents
    outbox: PageOutbox
    breaker: PolicyLimits  # read only: is the policy breaker open

    @classmethod
    def of(cls, stores: Stores, clock: Callable[[], float] = time.time) -> PagingStores:
        return cls(stores.incidents(clock=clock), stores.audit(clock=clock), stores.events(),
                   stores.page_outbox(clock=clock), stores.policy_limits(fleet_cap=0, clock=clock))


class PagingService:
    def __init__(self, stores: PagingStores, policy: PagingPolicy, sender: EventSender, *,
                 clock: Callable[[], float] = time.time, consumer: str | None = None) -> None:
        self.policy, self.sender, self.clock = policy, sender, clock
        self.incidents, self.audit = stores.incidents, stores.audit
        self.events, self.outbox, self.breaker = stores.events, stores.outbox, stores.breaker
        self.consumer = consumer or (f"{socket.gethostname()}-{os.getpid()}-"
                                     f"{secrets.token_hex(4)}")

    def tick(self, max_sends: int = 50) -> TickReport:
        report = TickReport()
        self.consume_events(report)
        self.scan(report)
        self.send_due(report, max_sends)
        return report

    # --- 1. events ---------------------------------------------------------------------
    def consume_events(self, report: TickReport) -> None:
        batch = (self.events.pending(GROUP, self.consumer)
                 or self.events.claim_stale(GROUP, self.consumer, STALE_MS)
                 or self.events.consume(GROUP, self.consumer, block_ms=None))
        for entry_id, event in batch:
            if event.get("type") == BREAKER_EVENT:
                self.on_breaker_tripped(event, report)
            else:
                self.on_event(event.get("type", ""), event.get("incident_id", ""), report)
            self.events.ack(GROUP, entry_id)
            report.events += 1

    def on_event(self, kind: str, incident_id: str, report: TickReport) -> None:
        if not incident_id:
            return
        now = self.clock()
        if kind == "incident.ack":
            item = PageItem(uuid.uuid4().hex, incident_id, PageAction.ACKNOWLEDGE, now)
            if self.outbox.enqueue(item):
                report.queued.append(f"acknowledge {incident_id}")
            else:
                self.outbox.mark_acked(incident_id)
        elif kind == "incident.resolved":
            self._resolve(incident_id, now, report)

    def on_breaker_tripped(self, event: dict[str, str], report: TickReport) -> None:
        """Automation stopped fleet-wide: a person must look now (no ``after_s`` wait)."""
        item = breaker_item(event, self.clock())
        if self.outbox.enqueue(item):
            report.queued.append(f"trigger {item.incident_id}")

    def _resolve(self, incident_id: str, now: float, report: TickReport) -> None:
        item = PageItem(uuid.uuid4().hex, incident_id, PageAction.RESOLVE, now)
        if self.outbox.enqueue(item):
            report.queued.append(f"resolve {incident_id}")

    # --- 2. scan -----------------------------------------------------------------------
    def scan(self, report: TickReport) -> None:
        now = self.clock()
        for incident in self.incidents.list(open_only=True):
            if incident.parent_id or not self._due(incident, now):
                continue
            if self.outbox.enqueue(trigger_item(incident, page_facts(incident), now)):
                report.queued.append(f"trigger {incident.id}")
        for incident_id in self.outbox.paged(_ACTIVE):
            if is_breaker_key(incident_id):
                if not self.breaker.breaker().open:
                    self._resolve(incident_id, now, report)
                continue
            found = self.incidents.get(incident_id)
            if found is None or not found.is_open:
                self._resolve(incident_id, now, report)

    def _due(self, incident: Incident, now: float) -> bool:
        state = self.outbox.state(incident.id)
        if not should_trigger(self.policy, incident.severity.value, incident.first_seen, now,
                              page_facts(incident).acked, state):
            return False
        entries = self.audit.timeline(incident.id)
        if any(e.action.startswith(PERSON_ACTIONS) for e in entries):
            self.outbox.mark_acked(incident.id)  # a person is on it: never look again
            return False
        return True

    # --- 3. send -----------------------------------------------------------------------
    def send_due(self, report: TickReport, max_sends: int = 50) -> None:
        for incident_id in self.outbox.due(self.clock(), limit=max_sends):
            lease = self.outbox.lease(incident_id, self.policy.lease_s)
            if not lease.acquire():
                continue  # another replica is sending this incident's head now
            item = self.outbox.head(incident_id)
            if item is None:
                lease.release()
                continue
            self._send(item, lease, report)

    def _send(self, item: PageItem, lease: Lease, report: TickReport) -> None:
        result = self.sender.send(item)
        if result.outcome is SendOutcome.SENT:
            self.outbox.complete(item, lease)
            report.sent += 1
        elif result.outcome is SendOutcome.RETRY:
            wait = (retry_after_s(result.retry_after, item.attempts + 1) if result.status == 429
                    else backoff_s(item.attempts + 1))
            self.outbox.defer(item, lease, self.clock() + wait, result.error)
            report.deferred += 1
        else:
            log.error("PagerDuty refused %s for %s: %s", item.action.value, item.incident_id,
                      result.error)
            self.outbox.reject(item, lease, result.error)
            report.rejected += 1
