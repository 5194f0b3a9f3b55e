"""``settings.extra["digest"]``: digest thresholds and schedules, validated at start."""

from __future__ import annotations

from pydantic import Field

from bot.core.schema import StrictModel


class DigestSchedule(StrictModel):
    """One digest: when (crontab, in ``timezone``), where, and over how long."""

    cron: str = "0 8 * * *"
    channel: str = ""  # empty: slack.channel
    period_hours: float = Field(default=24.0, gt=0, le=24 * 31)


class DigestSettings(StrictModel):
    """``settings.extra["digest"]``: thresholds and schedules."""

    # VRAM held at or above idle_mem_mib at or below idle_util_pct is idle
    idle_mem_mib: float = Field(default=1024.0, ge=0)
    idle_util_pct: float = Field(default=5.0, ge=0, le=100)
    max_gap_s: float = Field(default=600.0, gt=0)  # a longer sample gap counts only this much
    timezone: str = "UTC"
    schedules: list[DigestSchedule] = Field(default_factory=lambda: [DigestSchedule()])
