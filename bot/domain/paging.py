"""Pages as data: the outbox item, the PagerDuty Events v2 body, the retry schedule. Pure.

An item is one Events v2 call (trigger, acknowledge or resolve) for one incident; its
``dedup_key`` is the incident id, so PagerDuty folds a repeat into the same alert. Items
of one incident are sent in order (an acknowledge never overtakes its trigger).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from bot.domain.backoff import Backoff

SUMMARY_MAX = 1024  # Events v2: payload.summary is cut at 1024 characters
SOURCE_MAX = 255
PD_SEVERITIES = ("critical", "error", "warning", "info")
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 300.0
BACKOFF = Backoff(BACKOFF_BASE_S, BACKOFF_MAX_S)  # the one rule, bot/domain/backoff.py


class PageAction(StrEnum):
    TRIGGER = "trigger"
    ACKNOWLEDGE = "acknowledge"
    RESOLVE = "resolve"


@dataclass(frozen=True)
class PagePayload:
    """What a trigger says: the headline, the host, the severity and the details."""

    summary: str
    source: str
    severity: str
    custom_details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PageItem:
    id: str  # unique per item; the outbox's compare-and-swap compares it
    incident_id: str
    action: PageAction
    created: float
    payload: PagePayload | None = None  # triggers only
    attempts: int = 0
    last_error: str = ""

    @property
    def dedup_key(self) -> str:
        return self.incident_id

    def to_json(self) -> str:
        data = asdict(self)
        data["action"] = self.action.value
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> PageItem:
        d = json.loads(text)
        payload = PagePayload(**d["payload"]) if d.get("payload") else None
        return cls(id=str(d["id"]), incident_id=str(d["incident_id"]),
                   action=PageAction(d["action"]), created=float(d.get("created") or 0.0),
                   payload=payload, attempts=int(d.get("attempts") or 0),
                   last_error=str(d.get("last_error") or ""))

    def failed(self, error: str) -> PageItem:
        return replace(self, attempts=self.attempts + 1, last_error=error[:300])


def pd_severity(severity: str) -> str:
    """Our three levels map onto Events v2's four; anything unknown is a warning."""
    return severity if severity in PD_SEVERITIES else "warning"


def events_v2_body(item: PageItem, routing_key: str) -> dict[str, Any]:
    """The JSON body of ``POST /v2/enqueue`` for one item."""
    body: dict[str, Any] = {"routing_key": routing_key, "event_action": item.action.value,
                            "dedup_key": item.dedup_key}
    if item.action is PageAction.TRIGGER and item.payload is not None:
        p = item.payload
        body["payload"] = {"summary": p.summary[:SUMMARY_MAX] or item.incident_id,
                           "source": p.source[:SOURCE_MAX] or "incident-bot",
                           "severity": pd_severity(p.severity),
                           "custom_details": p.custom_details}
    return body


def backoff_s(attempts: int) -> float:
    """Exponential, capped: 2, 4, 8 … 300 s after the 1st, 2nd, 3rd … failure."""
    return BACKOFF.after(attempts)


def retry_after_s(header: str | None, attempts: int) -> float:
    """A 429's ``Retry-After`` (seconds) when it gives one, else the backoff."""
    return BACKOFF.or_retry_after(header, attempts)


# Which action may follow the incident's page state ("" never paged, "acked" acked before
# any page): a trigger only once and never after an ack, an acknowledge only after a
# trigger, a resolve after a trigger or an acknowledge. One table, read by the outbox.
ACKED = "acked"
ALLOWED_FROM: dict[str, tuple[str, ...]] = {
    PageAction.TRIGGER.value: ("",),
    PageAction.ACKNOWLEDGE.value: (PageAction.TRIGGER.value,),
    PageAction.RESOLVE.value: (PageAction.TRIGGER.value, PageAction.ACKNOWLEDGE.value),
    ACKED: ("",),
}

# A person on the incident (not an unauthorised click): no page for it.
PERSON_ACTIONS = ("incident.ack", "approval.approved", "approval.first_approver",
                  "approval.denied", "incident.resolve", "incident.snoozed", "incident.escalate")


@dataclass(frozen=True)
class PagingPolicy:
    """When to page: severities that may page, after how long unacked (0: at once)."""

    after_s: float = 600.0
    severities: tuple[str, ...] = ("critical",)
    timeout_s: float = 10.0

    @property
    def lease_s(self) -> float:
        """A sender's hold on an incident's head item: past the HTTP timeout, so a slow send
        never overlaps another replica's send of the same item."""
        return 2 * self.timeout_s + 5.0


def should_trigger(policy: PagingPolicy, severity: str, opened_at: float, now: float,
                   person_acted: bool, page_state: str) -> bool:
    """An open incident of a paged severity, never paged, nobody on it, old enough."""
    return (severity in policy.severities and not person_acted and page_state == ""
            and now - opened_at >= policy.after_s)
