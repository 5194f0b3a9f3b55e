"""The digest for one period, assembled from the model's parts and the waste account."""

from __future__ import annotations

from collections.abc import Iterable

from bot.digest.model import (
    ActionRecord,
    Digest,
    DigestSettings,
    IncidentRecord,
    JobRecord,
    SeriesByHost,
    action_counts,
    host_stats,
    incident_stats,
)
from bot.digest.response_stats import ResponseRow
from bot.digest.waste import waste
from bot.domain.repeat import RepeatOffence
from bot.domain.slurm import DrainedNode


def build_digest(start: float, end: float, series_by_host: SeriesByHost,
                 incidents: Iterable[IncidentRecord] = (), actions: Iterable[ActionRecord] = (),
                 jobs: Iterable[JobRecord] = (), cfg: DigestSettings | None = None,
                 drained: Iterable[DrainedNode] = (),
                 response: Iterable[ResponseRow] = (),
                 rma: Iterable[RepeatOffence] = ()) -> Digest:
    """The whole digest for ``[start, end)``; hosts wasting the most GPU time first."""
    if end <= start:
        raise ValueError("digest period must have end > start")
    cfg = cfg or DigestSettings()
    records = list(incidents)
    hosts = [host_stats(h, s, cfg, start, end) for h, s in series_by_host.items()]
    hosts.sort(key=lambda h: (-h.idle_gpu_minutes, h.host))
    return Digest(start, end, tuple(hosts), incident_stats(records, start, end),
                  action_counts(actions, start, end), tuple(jobs),
                  waste(series_by_host, records, cfg, start, end), tuple(drained),
                  tuple(response), tuple(rma))
