"""Wasted GPU-hours: VRAM held at ~0% utilisation, per host and per holding unit (pure).

The samples say when a GPU sat idle with memory held; the incidents say which unit held
it (their diagnosis named it) and when. Idle time inside an incident's window goes to its
unit; idle time no incident explains is "unattributed", so the totals always add up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.digest.model import (
    UNATTRIBUTED,
    DigestSettings,
    IncidentRecord,
    Point,
    SeriesByHost,
    Waste,
    idle_spans,
    split_metrics,
)
from bot.domain.findings import Diagnosis


def _overlap(span: Point, window: Point) -> float:
    return max(0.0, min(span[1], window[1]) - max(span[0], window[0]))


def attribute(spans: Sequence[Point], windows: Sequence[tuple[str, Point]]) -> dict[str, float]:
    """Seconds of ``spans`` per unit whose incident window covers them; the first window
    that covers a moment takes it (never counted twice); the rest is unattributed."""
    out: dict[str, float] = {}
    for span in spans:
        left = [span]
        for unit, window in windows:
            taken = sum(_overlap(p, window) for p in left)
            if taken:
                out[unit] = out.get(unit, 0.0) + taken
                left = [q for p in left for q in ((p[0], min(p[1], window[0])),
                                                   (max(p[0], window[1]), p[1])) if q[1] > q[0]]
        rest = sum(hi - lo for lo, hi in left)
        if rest:
            out[UNATTRIBUTED] = out.get(UNATTRIBUTED, 0.0) + rest
    return out


def waste(series_by_host: SeriesByHost, incidents: Sequence[IncidentRecord],
          cfg: DigestSettings, start: float, end: float) -> Waste:
    """GPU-hours held idle per host and per unit (by the incidents that named the unit)."""
    by_host: dict[str, float] = {}
    by_unit: dict[str, float] = {}
    for host, series in series_by_host.items():
        windows = [(i.unit, (i.opened_at, i.resolved_at if i.resolved_at is not None else end))
                   for i in sorted(incidents, key=lambda i: i.opened_at)
                   if i.host == host and i.unit]
        gpus, _ = split_metrics(series)
        for fields in gpus.values():
            spans = idle_spans(fields.get("mem_used_mib", ()), fields.get("util_pct", ()),
                               cfg, start, end)
            for unit, secs in attribute(spans, windows).items():
                by_unit[unit] = by_unit.get(unit, 0.0) + secs / 3600.0
                by_host[host] = by_host.get(host, 0.0) + secs / 3600.0
    return Waste(by_host, by_unit, cfg.idle_util_pct)


def holder_unit(diagnosis: Diagnosis | None) -> str:
    """The unit an incident's stored diagnosis found holding idle VRAM ("" if none)."""
    for f in diagnosis.findings if diagnosis is not None else ():
        restarter = f.evidence.get("restarter")
        if f.code == "gpu.idle_vram_held" and isinstance(restarter, Mapping):
            return str(restarter.get("name") or "")
    return ""
