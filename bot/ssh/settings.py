"""How the SSH pool connects and how long it waits: the ``ssh_defaults`` section."""

from __future__ import annotations

from pydantic import Field

from bot.core.schema import StrictModel


class SSHSettings(StrictModel):
    connect_timeout_s: float = Field(5.0, gt=0)
    command_timeout_s: float = Field(10.0, gt=0)
    max_sessions: int = Field(10, ge=1, le=64)
    idle_expiry_s: float = Field(300.0, gt=0)
    max_output_bytes: int = Field(1_048_576, gt=0)
