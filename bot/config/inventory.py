"""Inventory: a host name from ``settings.hosts`` or ``user@host:port`` -> ``SSHTarget``,
and the playbook options for that host (expected mounts, path prefixes, thresholds).

Thresholds come from ``settings.extra["diagnostics"]``, validated here so a typo fails at
start with one line naming the key.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import Field, ValidationError

from bot.config.settings import Settings
from bot.core import strings
from bot.core.errors import ConfigError, UserError
from bot.core.schema import StrictModel
from bot.domain.xid import xid_policy_from_extra
from bot.ssh.base import SSHTarget
from playbooks.base import PlaybookOptions


class DiagnosticsSettings(StrictModel):
    """``extra.diagnostics`` in the config file; every field optional."""

    samples: int = Field(3, ge=1, le=600)
    sample_interval_s: float = Field(0.25, ge=0, le=60)
    idle_util_pct: int = Field(5, ge=0, le=100)
    held_mib: int = Field(1024, ge=0)
    boot_window_s: float = Field(300.0, ge=0)
    recent_boot_s: float = Field(3600.0, ge=0)
    disk_full_pct: float = Field(90.0, gt=0, le=100)
    inode_full_pct: float = Field(90.0, gt=0, le=100)
    journal_vacuum_size: str = Field("500M", pattern=r"^[1-9][0-9]{0,5}[KMGT]$")
    command_timeout_s: float = Field(10.0, gt=0, le=600)
    du_timeout_s: float = Field(8.0, gt=0, le=600)
    nvlink_error_warn: int = Field(100, ge=1)
    ib_flap_warn: int = Field(3, ge=1)
    ib_symbol_warn: int = Field(100, ge=1)
    hot_c: int = Field(85, ge=30, le=130)


def diagnostics_settings(settings: Settings) -> DiagnosticsSettings:
    try:
        return DiagnosticsSettings.model_validate(settings.extra.get("diagnostics") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"key 'extra.diagnostics.{key}': {err['msg']}") from None


def _path(value: str | None) -> str | None:
    return os.path.expanduser(value) if value else None


class NotInInventory(UserError):
    """An alert or command named a host the config does not list: nothing may SSH to it."""

    def __init__(self, host: str, message: str = "") -> None:
        super().__init__(message or strings.HOST_NOT_IN_INVENTORY.format(host=host), 2)
        self.host = host


def resolve(settings: Settings, spec: str, *, key: str | None = None,
            known_hosts: str | None = None) -> SSHTarget:
    """An inventory name, or ``user@host:port`` (matched back to an inventory entry with
    the same address); ``key``/``known_hosts`` override the config. UserError (exit 2);
    NotInInventory for a bare name the inventory does not list."""
    name = spec if spec in settings.hosts else _by_address(settings, spec)
    if name is None and "@" not in spec:  # a bare name is an inventory name or nothing:
        raise NotInInventory(spec, strings.DIAG_BAD_TARGET.format(target=spec))  # not an address
    try:
        if name is not None:
            host = settings.hosts[name]
            return SSHTarget.parse(host.ssh, name=name, key_path=_path(key or host.key),
                                   known_hosts=_path(known_hosts or host.known_hosts),
                                   sudo=host.sudo)
        return SSHTarget.parse(spec, key_path=_path(key), known_hosts=_path(known_hosts))
    except ValueError:
        raise UserError(strings.DIAG_BAD_TARGET.format(target=spec), 2) from None


def known(settings: Settings, host: str) -> SSHTarget:
    """The SSH target of an inventory host (by name, or by its ``user@host:port``), or
    NotInInventory. Unlike ``resolve`` (the CLI's ad-hoc ``user@host:port``), a well-formed
    name that is not listed is never turned into an address to try: an alert for
    ``gpu-55`` must not end in "SSH authentication failed for gpu-55"."""
    name = host if host in settings.hosts else _by_address(settings, host)
    if name is None:
        raise NotInInventory(host)
    return resolve(settings, name)


def _by_address(settings: Settings, spec: str) -> str | None:
    try:
        wanted = SSHTarget.parse(spec).address
    except ValueError:
        return None
    for name, host in settings.hosts.items():
        try:
            if SSHTarget.parse(host.ssh).address == wanted:
                return name
        except ValueError:
            continue
    return None


def slurm_node(settings: Settings, target: SSHTarget) -> str | None:
    """The Slurm node an inventory host is (``hosts.NAME.slurm_node``), or None."""
    host = settings.hosts.get(target.name)
    return host.slurm_node if host is not None else None


def slurm_host(settings: Settings) -> str | None:
    """The first inventory host (by name) that is a Slurm node: it answers for the cluster."""
    return next((name for name, h in sorted(settings.hosts.items()) if h.slurm_node), None)


def options_for(settings: Settings, target: SSHTarget, **overrides: Any) -> PlaybookOptions:
    """Playbook options for one host: thresholds from config, mounts and prefixes per host."""
    diag = diagnostics_settings(settings).model_dump()
    host = settings.hosts.get(target.name)
    if host is not None:
        diag["expected_mounts"] = tuple(host.expected_mounts)
        diag["path_prefixes"] = tuple(host.allowed_path_prefixes)
        diag["expected_gpus"] = host.gpus
        diag["slurm_node"] = host.slurm_node
    diag["xid_policy"] = xid_policy_from_extra(settings.extra)
    diag.update(overrides)
    return PlaybookOptions(**diag)
