"""``extra.gate``: the health gate's levels per host group, and the repeat-offender window.

```yaml
extra:
  gate:
    levels: [readings, dcgm, smoke]      # in order; the default
    required: [readings]                 # a level whose tool is absent blocks only if listed
    dcgm_runs: [1, 2]                    # dcgmi diag -r 1, then -r 2
    smoke: {python: python3, matmul_n: 8192, iters: 20, mem_fraction: 0.8,
            timeout_s: 600, min_ratio: 0.8}
    retired_pages_max: 60
    repeat_window_s: 604800              # the same fault again this soon after a passed gate
    groups:                              # first match wins; unset keys keep the values above
      - {hosts: "dgx-*", levels: [readings, dcgm], dcgm_runs: [1]}
```

Validated once at start (a bad key is a ``ConfigError`` naming it); ``policy_for`` gives a
host's ``GatePolicy``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import Field, ValidationError

from bot.config.settings import Settings
from bot.core.errors import ConfigError
from bot.core.schema import StrictModel
from playbooks.health_gate import GateLevel, GatePolicy

Level = Literal["readings", "dcgm", "smoke"]
WEEK_S = 7 * 86400.0


class SmokeSettings(StrictModel):
    python: str = Field("python3", pattern=r"^[A-Za-z0-9_./+-]{1,200}$")
    matmul_n: int = Field(8192, ge=64, le=32768)
    iters: int = Field(20, ge=1, le=1000)
    mem_fraction: float = Field(0.8, gt=0, le=0.95)
    timeout_s: float = Field(600.0, gt=0, le=7200)
    min_ratio: float = Field(0.8, gt=0, le=1)


class GroupSettings(StrictModel):
    hosts: str = Field(pattern=r"^[A-Za-z0-9*?.\[\]_-]{1,253}$")
    levels: list[Level] | None = None
    required: list[Level] | None = None
    dcgm_runs: list[int] | None = None
    smoke: SmokeSettings | None = None
    retired_pages_max: int | None = Field(None, ge=1)


def _all_levels() -> list[Level]:
    return ["readings", "dcgm", "smoke"]


def _readings_only() -> list[Level]:
    return ["readings"]


class GateSettings(StrictModel):
    levels: list[Level] = Field(default_factory=_all_levels, min_length=1)
    required: list[Level] = Field(default_factory=_readings_only)
    dcgm_runs: list[int] = Field(default_factory=lambda: [1, 2], min_length=1)
    smoke: SmokeSettings = Field(default_factory=lambda: SmokeSettings())
    retired_pages_max: int = Field(60, ge=1)
    repeat_window_s: float = Field(WEEK_S, gt=0)
    groups: list[GroupSettings] = Field(default_factory=list)


def gate_settings(settings: Settings) -> GateSettings:
    raw: Any = settings.extra.get("gate") or {}
    try:
        parsed = GateSettings.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"key 'extra.gate.{key}': {err['msg']}") from None
    for where, runs in [("dcgm_runs", parsed.dcgm_runs),
                        *((f"groups.{i}.dcgm_runs", g.dcgm_runs or [1])
                          for i, g in enumerate(parsed.groups))]:
        if any(not 1 <= n <= 4 for n in runs):
            raise ConfigError(f"key 'extra.gate.{where}': dcgmi diag levels are 1..4")
    return parsed


def policy_for(settings: Settings, host: str) -> GatePolicy:
    """The gate ``host`` gets: the first group whose ``hosts`` pattern matches, over the
    top-level values."""
    cfg = gate_settings(settings)
    group = next((g for g in cfg.groups if fnmatchcase(host, g.hosts)), None)
    levels = (group.levels if group and group.levels else None) or cfg.levels
    required = group.required if group and group.required is not None else cfg.required
    runs = (group.dcgm_runs if group and group.dcgm_runs else None) or cfg.dcgm_runs
    smoke = (group.smoke if group and group.smoke else None) or cfg.smoke
    pages = (group.retired_pages_max if group and group.retired_pages_max else None) \
        or cfg.retired_pages_max
    return GatePolicy(levels=tuple(GateLevel(x) for x in dict.fromkeys(levels)),
                      required=frozenset(GateLevel(x) for x in required),
                      dcgm_runs=tuple(dict.fromkeys(runs)), smoke_python=smoke.python,
                      smoke_matmul_n=smoke.matmul_n, smoke_iters=smoke.iters,
                      smoke_mem_fraction=smoke.mem_fraction, smoke_timeout_s=smoke.timeout_s,
                      smoke_min_ratio=smoke.min_ratio, retired_pages_max=pages)


def repeat_window_s(settings: Settings) -> float:
    return gate_settings(settings).repeat_window_s
