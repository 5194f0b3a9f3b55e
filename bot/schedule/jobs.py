"""Which periodic jobs run and when: config (``settings.extra``) to ``ScheduledJob`` list.

The callables are injected by whoever wires the bot (``serve``): this module knows job
names and timings, never what a job does. A job configured without a callable is
skipped with a warning; a callable for an unknown name is a programming error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.core.errors import ConfigError
from bot.core.schema import StrictModel
from bot.digest.model import DigestSchedule, DigestSettings
from bot.schedule.escalation import EscalationSettings
from bot.schedule.leader import Firing, LeaderScheduler, ScheduledJob
from storage.stores import Stores

log = logging.getLogger(__name__)

KNOWN_JOBS = ("progress", "approval_expiry", "escalation", "sampling")
JobFunc = Callable[[Firing], None]
DigestFunc = Callable[[Firing, DigestSchedule], None]
M = TypeVar("M", bound=BaseModel)


class JobTiming(StrictModel):
    every_s: float | None = Field(default=None, gt=0)
    cron: str | None = None

    @model_validator(mode="after")
    def _one(self) -> JobTiming:
        if (self.every_s is None) == (self.cron is None):
            raise ValueError("give exactly one of every_s or cron")
        return self


def _default_jobs() -> dict[str, JobTiming]:
    return {"progress": JobTiming(every_s=30), "approval_expiry": JobTiming(every_s=30),
            "escalation": JobTiming(every_s=60), "sampling": JobTiming(every_s=60)}


class SchedulerSettings(StrictModel):
    """``settings.extra["scheduler"]``."""

    enabled: bool = True
    lease_ttl_s: float = Field(default=20.0, gt=0, le=300)
    renew_s: float = Field(default=5.0, gt=0)
    catchup_s: float = Field(default=600.0, ge=0)
    timezone: str = "UTC"
    jobs: dict[str, JobTiming] = Field(default_factory=_default_jobs)

    @field_validator("jobs")
    @classmethod
    def _known(cls, jobs: dict[str, JobTiming]) -> dict[str, JobTiming]:
        unknown = sorted(set(jobs) - set(KNOWN_JOBS))
        if unknown:
            raise ValueError(f"unknown jobs {unknown}; known: {list(KNOWN_JOBS)}")
        return jobs

    @model_validator(mode="after")
    def _check(self) -> SchedulerSettings:
        if self.renew_s >= self.lease_ttl_s:
            raise ValueError("renew_s must be shorter than lease_ttl_s")
        return self


def section(extra: Mapping[str, Any], name: str, model: type[M]) -> M:
    """Validate ``extra[name]`` with ``model``; one-line ``ConfigError`` naming the key."""
    try:
        return model.model_validate(extra.get(name) or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        key = f"extra.{name}.{where}" if where else f"extra.{name}"
        raise ConfigError(f"key '{key}': {err['msg']}") from None


def digest_job_name(schedule: DigestSchedule, channel: str) -> str:
    """Stable across replicas and restarts (firing claims are keyed by it)."""
    return f"digest:{channel}@{schedule.cron.replace(' ', '_')}"


def build_jobs(cfg: SchedulerSettings, periodic: Mapping[str, JobFunc], *,
               digest: DigestFunc | None = None, digest_cfg: DigestSettings | None = None,
               default_channel: str = "") -> list[ScheduledJob]:
    """One ``ScheduledJob`` per configured job that has a callable, plus one per digest schedule."""
    unknown = sorted(set(periodic) - set(KNOWN_JOBS))
    if unknown:
        raise ValueError(f"no such scheduled jobs: {unknown}")
    specs: list[ScheduledJob] = []
    for name, timing in cfg.jobs.items():
        func = periodic.get(name)
        if func is None:
            log.warning("scheduler: job %s is configured but nothing is wired to it", name)
            continue
        specs.append(ScheduledJob(name, func, every_s=timing.every_s, cron=timing.cron,
                             timezone=cfg.timezone))
    if digest is not None and digest_cfg is not None:
        specs += digest_jobs(digest, digest_cfg, default_channel)
    return specs


def digest_jobs(digest: DigestFunc, cfg: DigestSettings,
                default_channel: str) -> list[ScheduledJob]:
    """One cron job per digest schedule, bound to its channel (the default when empty)."""
    specs: list[ScheduledJob] = []
    for schedule in cfg.schedules:
        channel = schedule.channel or default_channel
        if not channel:
            log.warning("scheduler: digest %r has no channel; skipped", schedule.cron)
            continue
        bound = schedule.model_copy(update={"channel": channel})

        def run(firing: Firing, _s: DigestSchedule = bound) -> None:
            digest(firing, _s)

        specs.append(ScheduledJob(digest_job_name(schedule, channel), run, cron=schedule.cron,
                             timezone=cfg.timezone))
    return specs


def validate_crons(cfg: SchedulerSettings, digest_cfg: DigestSettings) -> None:
    """Fail at start (exit 2) on a bad crontab, naming it."""
    for name, timing in cfg.jobs.items():
        _check_cron(f"extra.scheduler.jobs.{name}.cron", timing.cron, cfg.timezone)
    for i, schedule in enumerate(digest_cfg.schedules):
        _check_cron(f"extra.digest.schedules.{i}.cron", schedule.cron, digest_cfg.timezone)


def _check_cron(key: str, cron: str | None, tz: str) -> None:
    if cron is None:
        return
    try:
        ScheduledJob("check", lambda _f: None, cron=cron, timezone=tz)
    except (ValueError, LookupError) as exc:
        raise ConfigError(f"key '{key}': bad crontab {cron!r}: {exc}") from None


def build_scheduler(stores: Stores, cfg: SchedulerSettings,
                    jobs: list[ScheduledJob]) -> LeaderScheduler:
    return LeaderScheduler(stores.claims(), stores.scheduler_lease(cfg.lease_ttl_s), jobs,
                           renew_s=cfg.renew_s, catchup_s=cfg.catchup_s)


def load_sections(extra: Mapping[str, Any]) -> tuple[SchedulerSettings, DigestSettings,
                                                     EscalationSettings]:
    """All three issue-8 config sections, validated, crontabs included."""
    sched = section(extra, "scheduler", SchedulerSettings)
    digest = section(extra, "digest", DigestSettings)
    validate_crons(sched, digest)
    return sched, digest, section(extra, "escalation", EscalationSettings)
