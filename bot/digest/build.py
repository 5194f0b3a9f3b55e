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
from bot.digest.needs import digest_needs
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
    """The whole digest for ``[start, end)``; hosts ranked by what they need of a person
    (``bot.domain.fleet_needs``), then by GPU time wasted; ``rma``: the nodes on the RMA
    list (a fault back after a passed health gate)."""
    if end <= start:
        raise ValueError("digest period must have end > start")
    cfg = cfg or DigestSettings()
    records, nodes = list(incidents), tuple(drained)
    hosts = [host_stats(h, s, cfg, start, end) for h, s in series_by_host.items()]
    needs = digest_needs(hosts, records, nodes, start, end)
    # most in need of a person first (across every cause), then by VRAM held idle
    rank = {n.host: k for k, n in enumerate(needs)}
    hosts.sort(key=lambda h: (rank.get(h.host, len(rank)), -h.idle_gpu_minutes, h.host))
    return Digest(start, end, tuple(hosts), incident_stats(records, start, end),
                  action_counts(actions, start, end), tuple(jobs),
                  waste(series_by_host, records, cfg, start, end), nodes,
                  tuple(response), needs, tuple(rma))
