"""What the approval desk handed the flow: the click events on the incident events stream
(issue 34: the chat layer queues them, the flow's consumer acts on them)."""

from __future__ import annotations

from redis import Redis

from storage.events import CLICK, IncidentEvents


def queued(redis: Redis) -> list[tuple[str, str, str]]:
    """Each click event as (type, approval id or, for an incident verb, incident id, user),
    oldest first."""
    return [(e["type"], e.get("approval_id") or e["incident_id"], e.get("user", ""))
            for _, e in IncidentEvents(redis).read() if e.get("type", "").startswith(CLICK)]
