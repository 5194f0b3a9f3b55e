"""The ``policies:``, ``policy_limits:`` and ``maintenance:`` sections, strict, and the pure
records built from them (``bot/domain/policy.py``, ``bot/domain/windows.py``).

Every field is checked at load, so a policy that could not be read (a misspelt mode, an
unknown time zone) stops the bot at start with the key and the reason, the way the rest
of the config does (``ConfigError``, exit 2); an action glob that no registered action
matches stops it the same way, from ``config check``'s list (``unmatched_action``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from pydantic import Field, field_validator, model_validator

from bot.core.schema import StrictModel
from bot.domain.incident import valid_kind
from bot.domain.policy import BlastLimit, FleetLimits, Policy, PolicyMatch, PolicyMode
from bot.domain.windows import parse_period, parse_window

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
APPROVER_RE = re.compile(r"^(\*|[UWS][A-Z0-9]{2,20})$")
GLOB_RE = re.compile(r"^[A-Za-z0-9._:@*?\[\]!/-]{1,253}$")


def unmatched_action(glob: str, kinds: Iterable[str]) -> str | None:
    """Why a policy's ``match.action`` glob is wrong (None: it matches a known kind)."""
    known = sorted(kinds)
    if any(fnmatchcase(kind, glob) for kind in known):
        return None
    return f"{glob!r} matches no catalog action; known: {known}"


def _glob(value: str) -> str:
    if not GLOB_RE.match(value):
        raise ValueError(f"{value!r} is not a name glob (letters, digits, . _ - : @ / * ? [])")
    return value


class PolicyMatchSettings(StrictModel):
    action: str = "*"  # catalog action kind glob, e.g. systemd.stop_disable or systemd.*
    unit: str | None = None
    hosts: str = "*"
    kinds: list[str] = Field(default_factory=list)  # incident kinds; empty: any
    params: dict[str, str] = Field(default_factory=dict)  # param name -> glob

    @field_validator("action")
    @classmethod
    def _action(cls, v: str) -> str:
        """The glob's grammar; that it matches a registered action (a built-in, a package's
        or an extension's ``ext.*``) is ``config check``'s (``policy_actions``): the
        extensions are named by this same config, and config imports no remediation."""
        return _glob(v)

    @field_validator("unit", "hosts")
    @classmethod
    def _globs(cls, v: str | None) -> str | None:
        return None if v is None else _glob(v)

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if not valid_kind(k)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not an incident kind")
        return v

    @field_validator("params")
    @classmethod
    def _params(cls, v: dict[str, str]) -> dict[str, str]:
        for name, glob in v.items():
            if not re.match(r"^[a-z_]{1,32}$", name):
                raise ValueError(f"{name!r} is not a parameter name")
            _glob(glob)
        return v


class LimitSettings(StrictModel):
    max_hosts: int = Field(ge=1, le=100_000)
    per: str = "1h"

    @field_validator("per")
    @classmethod
    def _per(cls, v: str) -> str:
        parse_period(v)
        return v


class WindowSettings(StrictModel):
    not_during: str

    @field_validator("not_during")
    @classmethod
    def _window(cls, v: str) -> str:
        parse_window(v)
        return v


class PolicySettings(StrictModel):
    name: str
    match: PolicyMatchSettings = Field(default_factory=lambda: PolicyMatchSettings())
    mode: PolicyMode = PolicyMode.APPROVE
    limit: LimitSettings | None = None
    approvers: list[str] = Field(default_factory=list)
    two_person: bool = False
    window: WindowSettings | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("a policy name is lower-case letters, digits, . _ - (64 at most)")
        return v

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if not APPROVER_RE.match(a)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a Slack user (U…/W…) or usergroup (S…) id")
        return v

    @model_validator(mode="after")
    def _auto_is_not_two_person(self) -> PolicySettings:
        """``auto`` runs without a click and ``two_person`` asks two people: the flow would
        silently ask instead (a policy never half-approves), so say it at start."""
        if self.mode is PolicyMode.AUTO and self.two_person:
            raise ValueError("mode auto runs without a click but two_person asks two people "
                             "to approve: choose one")
        return self


class PolicyLimitSettings(StrictModel):
    max_hosts_per_hour: int = Field(10, ge=0, le=100_000)
    max_fraction: float = Field(0.5, ge=0.0, le=1.0)


class MaintenanceSettings(StrictModel):
    """A recurring silence: alerts of these hosts (and kinds) inside the window are
    recorded, not posted."""

    hosts: str = "*"
    kinds: list[str] = Field(default_factory=list)
    every: str  # "Sat 02:00-04:00 UTC"
    reason: str = Field("", max_length=500)

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: str) -> str:
        return _glob(v)

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        return PolicyMatchSettings._kinds(v)

    @field_validator("every")
    @classmethod
    def _every(cls, v: str) -> str:
        parse_window(v)
        return v


def unique_names(policies: list[PolicySettings]) -> list[PolicySettings]:
    """Policy names appear in audits and messages: two with one name would be ambiguous."""
    seen: set[str] = set()
    for p in policies:
        if p.name in seen:
            raise ValueError(f"two policies are named {p.name!r}")
        seen.add(p.name)
    return policies


def auto_vs_two_person(policies: list[PolicySettings],
                       two_person: list[str]) -> list[PolicySettings]:
    """An ``auto`` policy whose action glob covers a kind ``approvals.two_person`` names
    would never run alone (two-person actions are never approved by a policy)."""
    for p in policies:
        hit = [k for k in two_person if p.mode is PolicyMode.AUTO
               and fnmatchcase(k, p.match.action)]
        if hit:
            raise ValueError(f"policy {p.name!r} is mode auto for {hit[0]}, which "
                             "approvals.two_person says needs two people: use mode approve "
                             "or narrow match.action")
    return policies


def to_policy(cfg: PolicySettings) -> Policy:
    m = cfg.match
    limit = (BlastLimit(cfg.limit.max_hosts, parse_period(cfg.limit.per))
             if cfg.limit else None)
    return Policy(
        name=cfg.name,
        match=PolicyMatch(m.action, m.hosts, tuple(m.kinds), dict(m.params), m.unit),
        mode=cfg.mode, limit=limit, approvers=tuple(cfg.approvers), two_person=cfg.two_person,
        not_during=parse_window(cfg.window.not_during) if cfg.window else None)


def to_limits(cfg: PolicyLimitSettings) -> FleetLimits:
    return FleetLimits(cfg.max_hosts_per_hour, cfg.max_fraction)

