"""The digest's edges: read samples and records from Redis, post, attach the chart.

Everything computed lives in ``bot.digest.model`` (pure); this module only fetches, calls it,
and talks to the injected ``ChatBackend``. The scheduler's digest job passes its slot
time as the period's end, so whichever replica runs it posts the same period.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from bot.chat.base import ChatBackend, MessageRef
from bot.core import metrics, strings
from bot.digest.build import build_digest
from bot.digest.fleet_chart import digest_chart
from bot.digest.model import (
    ActionRecord,
    Digest,
    DigestSchedule,
    DigestSettings,
    IncidentRecord,
    JobRecord,
    Point,
)
from bot.digest.render import fmt_period, render_digest
from bot.digest.response_stats import ResponseRow
from bot.digest.waste import holder_unit
from bot.domain.repeat import RepeatOffence
from bot.domain.slurm import DrainedNode
from storage.audit import AuditLog
from storage.samples import SampleStore

log = logging.getLogger(__name__)

ACTION_PREFIXES = ("action", "remediation")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class IncidentSource(Protocol):
    def incident_records(self) -> Iterable[IncidentRecord]: ...


class ActionSource(Protocol):
    def action_records(self, start: float, end: float) -> Iterable[ActionRecord]: ...


class JobSource(Protocol):
    def job_records(self) -> Iterable[JobRecord]: ...


@dataclass(frozen=True)
class DigestResult:
    digest: Digest
    ref: MessageRef
    chart: Path | None


class DigestRunner:
    def __init__(self, samples: SampleStore, chat: ChatBackend, out_dir: Path, *,
                 incidents: IncidentSource | None = None, actions: ActionSource | None = None,
                 jobs: JobSource | None = None, cfg: DigestSettings | None = None,
                 clock: Callable[[], float] = time.time,
                 drained: Callable[[], Iterable[DrainedNode]] | None = None,
                 response: Callable[[float, float], Iterable[ResponseRow]] | None = None,
                 rma: Callable[[], Iterable[RepeatOffence]] | None = None,
                 ) -> None:
        self.samples, self.chat, self.out_dir = samples, chat, out_dir
        self.response = response  # MTTA / MTTR per kind over a period (issue 27)
        self.drained = drained  # the Slurm nodes out of the scheduler now (issue 26)
        self.rma = rma  # the nodes sent to RMA as repeat offenders (issue 36)
        self.incidents, self.actions, self.jobs = incidents, actions, jobs
        self.cfg = cfg or DigestSettings()
        self.clock = clock

    def series(self, start: float, end: float) -> dict[str, dict[str, list[Point]]]:
        out = {h: self.samples.host_series(h, start, end) for h in self.samples.hosts()}
        return {h: s for h, s in out.items() if s}

    def build(self, start: float, end: float) -> tuple[Digest, dict[str, dict[str, list[Point]]]]:
        series = self.series(start, end)
        digest = build_digest(
            start, end, series,
            incidents=self.incidents.incident_records() if self.incidents else (),
            actions=self.actions.action_records(start, end) if self.actions else (),
            jobs=self.jobs.job_records() if self.jobs else (), cfg=self.cfg,
            drained=self.drained() if self.drained else (),
            response=self.response(start, end) if self.response else (),
            rma=self.rma() if self.rma else ())
        return digest, series

    def chart(self, digest: Digest, series: dict[str, dict[str, list[Point]]], tag: str) -> Path:
        stamp = datetime.fromtimestamp(digest.end, UTC).strftime("%Y%m%dT%H%M%SZ")
        name = f"digest-{_SAFE_NAME.sub('_', tag)[:40]}-{stamp}.png"
        return digest_chart(digest, series, self.out_dir / name, self.cfg)

    def run(self, channel: str, start: float, end: float,
            thread: MessageRef | None = None) -> DigestResult:
        """Post the digest for ``[start, end)``; the chart goes in its thread."""
        digest, series = self.build(start, end)
        ref = self.chat.post(channel, render_digest(digest), thread=thread)
        metrics.DIGESTS_POSTED.labels(channel=channel).inc()
        path: Path | None = None
        try:
            path = self.chart(digest, series, channel)
            title = strings.DIGEST_CHART_TITLE.format(period=fmt_period(start, end))
            self.chat.upload(ref, path, title)
        except Exception:  # the digest text is out; a chart failure must not hide it
            log.exception("digest chart for %s failed", channel)
        return DigestResult(digest, ref, path)

    def now(self, channel: str, hours: float = 24.0,
            thread: MessageRef | None = None) -> DigestResult:
        """On demand (``/ir digest now``, ``incident-bot digest now``): the last ``hours``."""
        end = self.clock()
        return self.run(channel, end - hours * 3600.0, end, thread)

    def for_slot(self, end: float, schedule: DigestSchedule) -> None:
        """A scheduled digest: the period ending at the slot's scheduled time."""
        self.run(schedule.channel, end - schedule.period_hours * 3600.0, end)


# --- adapters over the other stores (duck-typed: they are read, never changed) -------------

class StoreIncidents:
    """``IncidentStore.list()`` → ``IncidentRecord`` (every incident, the digest filters)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def incident_records(self) -> list[IncidentRecord]:
        return [incident_record(i) for i in self.store.list(open_only=False)]


def incident_record(i: Any) -> IncidentRecord:
    """One stored incident; ``unit`` is what its diagnosis found holding the GPUs, so the
    digest can charge that unit for the idle time inside the incident's window."""
    resolved = getattr(i, "resolved_at", None)
    return IncidentRecord(
        id=str(i.id), host=str(i.host), kind=str(i.kind),
        severity=str(getattr(i.severity, "value", i.severity)),
        state=str(getattr(i.state, "value", i.state)), opened_at=float(i.first_seen),
        resolved_at=float(resolved) if resolved is not None else None,
        unit=holder_unit(getattr(i, "diagnosis", None)))


class AuditActions:
    """Remediation entries of the global audit stream within a period (ids are ms times)."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def action_records(self, start: float, end: float) -> list[ActionRecord]:
        return [action_record(e.incident_id, e.action, e.detail, e.ts, e.actor)
                for e in self.audit.between(start, end) if e.action.startswith(ACTION_PREFIXES)]


def action_record(incident_id: str, action: str, detail: dict[str, Any], ts: float,
                  actor: str) -> ActionRecord:
    """``kind`` from the detail (or the action name), ``result`` from its outcome."""
    kind = str(detail.get("kind") or action)
    result = str(detail.get("result") or detail.get("outcome") or detail.get("status")
                 or action.rsplit(".", 1)[-1])
    return ActionRecord(incident_id, kind, result, ts, actor)
