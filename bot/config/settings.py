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

import yaml
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.core.errors import ConfigError
from bot.core.schema import StrictModel
from bot.domain.validate import HOST_CHARS
from bot.ssh.settings import SSHSettings

SECRET_ENV = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN",
              "INCIDENT_BOT_ALERT_TOKEN")
EXTRA_SECTIONS = frozenset(
    {"diagnostics", "remediation", "scheduler", "digest", "escalation", "extract",
     "reconcile"})  # reconcile: issue 24 (bot/flow/reconcile.py)
TARGET_RE = re.compile(r"^(?:(?P<user>[a-z_][a-z0-9_.-]{0,31})@)?"
                       rf"(?P<host>[{HOST_CHARS}]+?)(?::(?P<port>\d{{1,5}}))?$")


class HttpSettings(StrictModel):
    host: str = "0.0.0.0"
    port: int = Field(8080, ge=0, le=65535)
    max_body_bytes: int = Field(1_048_576, gt=0)
    group_commit: bool = True  # alert batches waiting together share one Redis write


class SlackSettings(StrictModel):
    channel: str = ""
    escalation_channel: str = ""
    approvers: list[str] = Field(default_factory=list)
    api_url: str = "https://slack.com/api/"
    slash_command: str = "/ir"
    socket_mode: bool | None = None  # None: on when SLACK_APP_TOKEN is set
    oncall: str = ""  # user group (S…) @mentioned on critical incidents


class HostSettings(StrictModel):
    ssh: str  # user@host:port
    key: str | None = None
    known_hosts: str | None = None
    sudo: bool = False  # run probes and actions through `sudo -n` (non-root users)
    expected_mounts: list[str] = Field(default_factory=list)
    allowed_path_prefixes: list[str] = Field(default_factory=lambda: ["/data", "/shared", "/var"])
    gpus: int | None = Field(None, ge=0, le=64)  # expected GPU count: fewer is a finding

    @field_validator("ssh")
    @classmethod
    def _target(cls, v: str) -> str:
        if not TARGET_RE.match(v):
            raise ValueError("must look like user@host:port")
        return v


class AlertSettings(StrictModel):
    group_wait_s: float = Field(30.0, ge=0)
    kinds: dict[str, str] = Field(default_factory=dict)  # alertname -> kind, added to defaults


class ApprovalSettings(StrictModel):
    expiry_s: float = Field(1800.0, gt=0)
    allow_self_approval: bool = True
    two_person: list[str] = Field(default_factory=list)  # action kinds needing two approvers
    per_kind: dict[str, list[str]] = Field(default_factory=dict)  # kind -> approvers


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

    # secrets: environment only
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    incident_bot_alert_token: SecretStr | None = None

    @field_validator("extra")
    @classmethod
    def _known_sections(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Each section is validated by its feature; a misspelt section name fails here."""
        unknown = sorted(set(v) - EXTRA_SECTIONS)
        if unknown:
            raise ValueError(f"unknown section {unknown[0]!r}; known: {sorted(EXTRA_SECTIONS)}")
        return v

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
    """Load YAML (if given) plus the environment; raise ConfigError with one line on error."""
    data: dict[str, Any] = {}
    source = Path(path) if path else None
    if source is not None:
        data = _read_yaml(source)
        _reject_secrets_in_file(source, data)
    try:
        return Settings(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        where = str(source) if source else "environment"
        raise ConfigError(f"{where}: key '{key}': {err['msg']}") from None


def secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def env_redis_url(default: str | None = None) -> str | None:
    return os.environ.get("REDIS_URL", default)
