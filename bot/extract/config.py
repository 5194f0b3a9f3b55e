"""Extraction settings under ``extra.extract`` in the config file, validated here.

It is handed the ``extra`` mapping, not the settings: bot/extract sits below bot/config
and imports nothing above it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError

from bot.core.errors import ConfigError
from bot.core.schema import StrictModel


class ExtractSettings(StrictModel):

    alerts_url: str | None = None  # where a worker posts disk_full alerts (the bot's /alerts)
    job_monitoring_interval: int = Field(5, ge=1, le=600)
    maintenance_interval: int = Field(10, ge=1, le=3600)
    abandoned_grace_s: int = Field(15, ge=1, le=3600)
    worker_ttl: int = Field(30, ge=16, le=3600)


def extract_settings(extra: Mapping[str, Any]) -> ExtractSettings:
    """``extra.extract`` validated (``ConfigError`` naming the key)."""
    try:
        return ExtractSettings(**extra.get("extract", {}))
    except (ValidationError, TypeError) as exc:
        detail = (
            exc.errors()[0] if isinstance(exc, ValidationError) else {"loc": (), "msg": str(exc)}
        )
        key = ".".join(["extra", "extract", *(str(p) for p in detail["loc"])])
        raise ConfigError(f"key '{key}': {detail['msg']}") from None


def redact(url: str) -> str:
    """A Redis URL fit for an error message: no password."""
    return re.sub(r"//[^@/]*@", "//***@", url)
