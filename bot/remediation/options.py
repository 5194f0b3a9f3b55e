"""Knobs for deadlines and verification, from ``settings.extra["remediation"]``.

Defaults fit real hosts (a vLLM server can take several seconds to release 8 GPUs);
tests shorten them. The per-step deadlines live in the catalog; ``step_timeout_s``
overrides them all at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError

from bot.core.errors import ConfigError
from bot.core.schema import StrictModel

if TYPE_CHECKING:
    from storage.jobs import JobStore


@dataclass(frozen=True)
class RemediationOptions:
    gpu_free_mib: float = 1024.0  # a GPU counts as free below this much used memory
    verify_timeout_s: float = 30.0  # poll this long for the effect to show
    poll_interval_s: float = 0.5
    settle_s: float = 1.5  # freed GPUs must stay free this long (a respawn comes back fast)
    reprobe_s: float = 5.0  # after a deadline, watch this long for the step's effect
    term_grace_s: float = 10.0  # process.terminate: SIGTERM → SIGKILL
    restart_margin_s: float = 2.0  # verify this long past a unit's RestartUSec
    step_timeout_s: float | None = None  # overrides every catalog deadline when set
    probe_timeout_s: float = 10.0
    chain_resume: bool = False  # run extraction.resume right after a GPU-freeing success
    allowed_prefixes: tuple[str, ...] = ("/data", "/shared", "/var")  # disk.cleanup only
    protected_dirs: tuple[str, ...] = ()  # output dirs of paused/queued jobs: never deleted
    gate_need_mib: int = 0  # health gate: free MiB every GPU needs before a resume (0: no check)
    expected_gpus: int | None = None  # the inventory's count: a reset's gate checks it
    jobs: JobStore | None = None  # the bot's extraction queue, for extraction.resume

    def step_deadline(self, catalog_s: float) -> float:
        return self.step_timeout_s if self.step_timeout_s is not None else catalog_s


class RemediationSettings(StrictModel):
    """The YAML shape under ``extra: {remediation: {...}}``."""

    gpu_free_mib: float = Field(1024.0, gt=0)
    verify_timeout_s: float = Field(30.0, gt=0)
    poll_interval_s: float = Field(0.5, gt=0)
    settle_s: float = Field(1.5, ge=0)
    reprobe_s: float = Field(5.0, ge=0)
    term_grace_s: float = Field(10.0, ge=0)
    restart_margin_s: float = Field(2.0, ge=0)
    step_timeout_s: float | None = Field(None, gt=0)
    probe_timeout_s: float = Field(10.0, gt=0)
    chain_resume: bool = False
    gate_need_mib: int = Field(0, ge=0)


def options_from_extra(extra: dict[str, Any], *,
                       jobs: JobStore | None = None) -> RemediationOptions:
    """Options from ``settings.extra``; a bad value is a ``ConfigError`` naming the key."""
    try:
        parsed = RemediationSettings(**(extra.get("remediation") or {}))
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"key 'extra.remediation.{key}': {err['msg']}") from None
    return RemediationOptions(**parsed.model_dump(), jobs=jobs)
