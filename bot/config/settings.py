"""One settings object: a YAML file for structure, the environment for secrets.

Secrets (Slack tokens, the alert token) are read only from the environment, never
from the file: a config file is meant to be committed. A bad file fails at start with
one line naming the file, the key and the problem (``ConfigError``, exit status 2).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.config.fleet_policy import (
    MaintenanceSettings,
    PolicyLimitSettings,
    PolicySettings,
    auto_vs_two_person,
    unique_names,
)
from bot.core.errors import ConfigError
from bot.core.schema import StrictModel
from bot.domain.paging import PagingPolicy
from bot.domain.validate import HOST_CHARS, SLURM_NODE_RE, valid_host
from bot.ssh.settings import SSHSettings

SECRET_ENV = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN",
              "INCIDENT_BOT_ALERT_TOKEN", "INCIDENT_BOT_DIAGNOSE_TOKEN")
EXTRA_SECTIONS = frozenset(
    {"diagnostics", "remediation", "scheduler", "digest", "escalation", "extract",
     "reconcile",  # reconcile: issue 24 (bot/flow/reconcile.py)
     "xid_policy",  # bot/domain/xid.py (documented before it was accepted here)
     "gate"})  # the graded health gate and repeat offenders (bot/config/gate.py)
TARGET_RE = re.compile(r"^(?:(?P<user>[a-z_][a-z0-9_.-]{0,31})@)?"
                       rf"(?P<host>[{HOST_CHARS}]+?)(?::(?P<port>\d{{1,5}}))?$")


class HttpSettings(StrictModel):
    host: str = "0.0.0.0"
    port: int = Field(8080, ge=0, le=65535)
    max_body_bytes: int = Field(1_048_576, gt=0)
    group_commit: bool = True  # alert batches waiting together share one Redis write
    # slow clients (issue 25): a request's headers, then its body, must arrive in time;
    # an idle keep-alive connection is closed; past max_connections new requests get 503
    header_timeout_s: float = Field(10.0, gt=0, le=600)
    body_timeout_s: float = Field(30.0, gt=0, le=600)
    keep_alive_s: int = Field(5, ge=1, le=600)
    max_connections: int = Field(256, ge=1)
    max_header_bytes: int = Field(16_384, ge=1024, le=1_048_576)


class StormSettings(StrictModel):
    """A burst as one message per kind (issue 37, ``bot/flow/storm.py``): more than
    ``per_minute`` new incidents in a minute in the channel start a storm; it collects its
    kind until ``quiet_s`` pass without a new one. ``per_minute: 0`` turns storms off."""

    per_minute: int = Field(10, ge=0, le=10_000)
    quiet_s: float = Field(300.0, gt=0, le=86_400)


class SlackSettings(StrictModel):
    channel: str = ""
    escalation_channel: str = ""
    approvers: list[str] = Field(default_factory=list)
    api_url: str = "https://slack.com/api/"
    slash_command: str = "/ir"
    socket_mode: bool | None = None  # None: on when SLACK_APP_TOKEN is set
    oncall: str = ""  # user group (S…) @mentioned on critical incidents
    storm: StormSettings = Field(default_factory=StormSettings)

    @field_validator("api_url")
    @classmethod
    def _api_url(cls, v: str) -> str:
        return http_url(v)


class HostSettings(StrictModel):
    ssh: str  # user@host:port
    key: str | None = None
    known_hosts: str | None = None
    sudo: bool = False  # non-root user: actions' commands through `sudo -n`; probes never
    expected_mounts: list[str] = Field(default_factory=list)
    allowed_path_prefixes: list[str] = Field(default_factory=lambda: ["/data", "/shared", "/var"])
    gpus: int | None = Field(None, ge=0, le=64)  # expected GPU count: fewer is a finding
    slurm_node: str | None = None  # a Slurm node: drains and resumes run scontrol on it

    @field_validator("slurm_node")
    @classmethod
    def _slurm_node(cls, v: str | None) -> str | None:
        if v is not None and not SLURM_NODE_RE.match(v):
            raise ValueError("must be one Slurm node name ([A-Za-z0-9._-], at most 64)")
        return v

    @field_validator("ssh")
    @classmethod
    def _target(cls, v: str) -> str:
        match = TARGET_RE.match(v)
        if not match:
            raise ValueError("must look like user@host:port")
        host_in_range(match["host"])
        if match["port"] is not None:
            port_in_range(int(match["port"]))
        return v


class AlertSettings(StrictModel):
    group_wait_s: float = Field(30.0, ge=0)
    kinds: dict[str, str] = Field(default_factory=dict)  # alertname -> kind, added to defaults


class ApprovalSettings(StrictModel):
    expiry_s: float = Field(1800.0, gt=0)
    allow_self_approval: bool = True
    two_person: list[str] = Field(default_factory=list)  # action kinds needing two approvers
    per_kind: dict[str, list[str]] = Field(default_factory=dict)  # kind -> approvers


ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
FINDING_CODE_RE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*$")
PAGED_SEVERITIES = ("info", "warning", "critical")
RUNBOOK_URL_MAX = 3000  # Slack's limit on a link button's url


def port_in_range(port: int) -> int:
    """A TCP port a host can listen on (1-65535), or a ValueError naming it."""
    if not 0 < port < 65536:
        raise ValueError(f"port {port} out of range 1..65535")
    return port


def host_in_range(host: str) -> str:
    """A host name or address within DNS's limits (253 characters, labels of 1-63), or a
    ValueError saying which limit it breaks."""
    if not valid_host(host):
        raise ValueError(f"host {host[:80]!r} is not a host name or address")
    if ":" not in host and any(not 0 < len(label) < 64 for label in host.split(".")):
        raise ValueError(f"host {host[:80]!r} has an empty label or one over 63 characters")
    return host


def redis_url_in_range(value: str) -> str:
    """``redis://``, ``rediss://`` or ``unix://``, with a host and port in range."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:  # urlsplit's own "Port out of range 0-65535"
        raise ValueError(f"not a Redis URL: {exc}") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"must start with redis://, rediss:// or unix://, got {value[:80]!r}")
    if parts.scheme != "unix":
        host_in_range(parts.hostname or "")
        if port is not None:
            port_in_range(port)
    return value


def http_url(value: str) -> str:
    """An absolute http(s) URL with a host, or a ValueError saying so."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in value):
        raise ValueError(f"must be an http(s) URL, got {value!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"port out of range 1..65535 in {value[:80]!r}") from None
    if port is not None:
        port_in_range(port)
    return value


class PagerDutySettings(StrictModel):
    """PagerDuty Events API v2 (issue 27); the routing key is read from the environment."""

    routing_key_env: str = "PD_ROUTING_KEY"
    url: str = "https://events.pagerduty.com/v2/enqueue"
    after_s: float = Field(600.0, ge=0)  # page an incident nobody acked within this; 0: at once
    severities: list[str] = Field(default_factory=lambda: ["critical"])
    timeout_s: float = Field(10.0, gt=0, le=60)

    @field_validator("routing_key_env")
    @classmethod
    def _env_name(cls, v: str) -> str:
        if not ENV_NAME_RE.match(v):
            raise ValueError("must be an environment variable name like PD_ROUTING_KEY")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return http_url(v)

    @field_validator("severities")
    @classmethod
    def _severities(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if s not in PAGED_SEVERITIES]
        if bad:
            raise ValueError(f"unknown severity {bad[0]!r}; known: {list(PAGED_SEVERITIES)}")
        return v

    def routing_key(self) -> str | None:
        return os.environ.get(self.routing_key_env) or None

    def policy(self) -> PagingPolicy:
        return PagingPolicy(after_s=self.after_s, severities=tuple(self.severities),
                            timeout_s=self.timeout_s)


class PagingSettings(StrictModel):
    pagerduty: PagerDutySettings | None = None  # None: no paging


def _runbooks(v: dict[str, str]) -> dict[str, str]:
    for code, url in v.items():
        if not FINDING_CODE_RE.match(code):
            raise ValueError(f"{code!r} is not a finding code like gpu.xid")
        http_url(url)
        if len(url) > RUNBOOK_URL_MAX:
            raise ValueError(f"runbook URL for {code!r} is over {RUNBOOK_URL_MAX} characters")
    return v


class Settings(BaseSettings):
    """Everything the bot reads at start. ``REDIS_URL`` overrides ``redis_url``."""

    model_config = SettingsConfigDict(extra="forbid", env_prefix="", env_nested_delimiter=None)

    redis_url: str = "redis://localhost:6379/0"
    http: HttpSettings = Field(default_factory=lambda: HttpSettings())
    slack: SlackSettings = Field(default_factory=lambda: SlackSettings())
    hosts: dict[str, HostSettings] = Field(default_factory=dict)
    ssh_defaults: SSHSettings = Field(default_factory=lambda: SSHSettings())
    alerts: AlertSettings = Field(default_factory=lambda: AlertSettings())
    approvals: ApprovalSettings = Field(default_factory=lambda: ApprovalSettings())
    chat_backend: str = "slack"  # or "terminal"
    extra: dict[str, Any] = Field(default_factory=dict)  # per-feature settings, validated there
    paging: PagingSettings = Field(default_factory=lambda: PagingSettings())
    runbooks: dict[str, str] = Field(default_factory=dict)  # finding code -> runbook URL
    policies: list[PolicySettings] = Field(default_factory=list)  # first match wins (issue 28)
    policy_limits: PolicyLimitSettings = Field(default_factory=lambda: PolicyLimitSettings())
    maintenance: list[MaintenanceSettings] = Field(default_factory=list)  # recurring silences
    # directories of operator extensions (YAML probes, findings, actions: docs/extending.md)
    extensions: list[str] = Field(default_factory=list, max_length=16)

    # secrets: environment only
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    incident_bot_alert_token: SecretStr | None = None
    # people's terminals asking serve for a diagnosis (``POST /diagnose``, issue 37): not
    # the alert token, which every GPU host's agent holds
    incident_bot_diagnose_token: SecretStr | None = None

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str) -> str:
        return redis_url_in_range(v)

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, v: dict[str, HostSettings]) -> dict[str, HostSettings]:
        for name in v:
            if not valid_host(name):
                raise ValueError(f"{name[:80]!r} is not a host name ([A-Za-z0-9._:-], "
                                 "at most 253)")
        return v

    @field_validator("extra")
    @classmethod
    def _known_sections(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Each section is validated by its feature; a misspelt section name fails here."""
        unknown = sorted(set(v) - EXTRA_SECTIONS)
        if unknown:
            raise ValueError(f"unknown section {unknown[0]!r}; known: {sorted(EXTRA_SECTIONS)}")
        return v

    @field_validator("runbooks")
    @classmethod
    def _runbook_urls(cls, v: dict[str, str]) -> dict[str, str]:
        return _runbooks(v)

    @field_validator("policies")
    @classmethod
    def _unique_policies(cls, v: list[PolicySettings],
                         info: ValidationInfo) -> list[PolicySettings]:
        approvals = info.data.get("approvals")  # declared above: validated already
        kinds = approvals.two_person if isinstance(approvals, ApprovalSettings) else []
        return auto_vs_two_person(unique_names(v), kinds)

    @classmethod
    def settings_customise_sources(  # type: ignore[override]
        cls, settings_cls: type[BaseSettings], init_settings: Any, env_settings: Any, **_: Any
    ) -> tuple[Any, ...]:
        """Environment over file; no dotenv or secrets-dir sources."""
        return (env_settings, init_settings)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", exc)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping, got {type(data).__name__}")
    return data


def _reject_secrets_in_file(path: Path, data: dict[str, Any]) -> None:
    for name in SECRET_ENV:
        if name.lower() in data:
            raise ConfigError(f"{path}: key '{name.lower()}': secrets are read only from the "
                              f"environment ({name})")


def load_settings(path: str | Path | None = None) -> Settings:
    """Load YAML (if given) plus the environment; raise ConfigError with one line on error
    (the first problem; ``settings_problems`` lists them all, for ``config check``)."""
    settings, problems = settings_problems(path)
    if problems or settings is None:
        raise ConfigError(problems[0])
    return settings


def settings_problems(path: str | Path | None = None) -> tuple[Settings | None, list[str]]:
    """The settings and every schema problem, one line each naming the file and the key.

    When some top-level keys are wrong, the settings are still built from the others (a
    ``Settings`` with the defaults in their place), so later checks can look at the rest;
    ``None`` only when the file cannot be read at all.
    """
    data: dict[str, Any] = {}
    source = Path(path) if path else None
    where = str(source) if source else "environment"
    try:
        if source is not None:
            data = _read_yaml(source)
            _reject_secrets_in_file(source, data)
        return Settings(**data), []
    except ConfigError as exc:
        return None, [exc.message]
    except ValidationError as exc:
        errors = exc.errors()
    problems = [problem_line(where, err["loc"], err["msg"]) for err in errors]
    try:
        return Settings(**_without(data, [tuple(err["loc"]) for err in errors])), problems
    except ValidationError:  # an environment variable is wrong: nothing to build on
        return None, problems


def _without(data: dict[str, Any], locs: list[tuple[int | str, ...]]) -> dict[str, Any]:
    """``data`` less what failed: a bad entry of a mapping (one host), else the whole key."""
    kept = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for loc in locs:
        if not loc or loc[0] not in kept:
            continue
        top = kept[str(loc[0])]
        if len(loc) > 1 and isinstance(top, dict) and loc[0] != "extra" and loc[1] in top:
            top.pop(str(loc[1]))
        else:
            kept.pop(str(loc[0]))
    return kept


def problem_line(where: str, loc: tuple[int | str, ...] | list[int | str], msg: str) -> str:
    """``config.yaml: key 'hosts.gpu-01.ssh': must look like user@host:port``."""
    key = ".".join(str(p) for p in loc) or "(top level)"
    return f"{where}: key '{key}': {msg.removeprefix('Value error, ')}"


def secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def env_redis_url(default: str | None = None) -> str | None:
    return os.environ.get("REDIS_URL", default)
