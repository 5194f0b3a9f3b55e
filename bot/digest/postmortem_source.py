"""Read a postmortem's inputs from Redis: the incident and its audit stream.

The one impure step before the pure builder, shared by ``incident-bot postmortem`` and the
flow's thread post on resolve (any replica: both read only what Redis holds).
"""

from __future__ import annotations

from bot.digest.postmortem import Postmortem, build_postmortem, facts_from_incident
from storage.audit import AuditLog
from storage.incidents import IncidentStore


def recent_postmortems(incidents: IncidentStore, audit: AuditLog, since: float,
                       limit: int = 1000) -> list[Postmortem]:
    """Postmortems of the incidents opened since ``since`` (newest ``limit`` looked at)."""
    found = [i for i in incidents.list(limit=limit) if i.first_seen >= since]
    return [build_postmortem(i, audit.timeline(i.id), facts_from_incident(i)) for i in found]


def load_postmortem(incidents: IncidentStore, audit: AuditLog,
                    incident_id: str) -> Postmortem | None:
    """The postmortem of ``incident_id`` as Redis has it now; None when there is no such
    incident."""
    incident = incidents.get(incident_id)
    if incident is None:
        return None
    return build_postmortem(incident, audit.timeline(incident_id),
                            facts_from_incident(incident))
