"""Which kind an alert is, and which inventory host it is about. Pure.

Kinds come from the ``alertname`` (defaults below, plus ``alerts.kinds`` in the config)
or an explicit ``incident_kind`` label; anything else is ``triage``. The host comes
from the labels ``host``, ``nodename`` or ``instance`` (port stripped), then is matched
against the inventory by name, by SSH address, or by the short name of an FQDN.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bot.domain.incident import valid_host, valid_kind
from bot.domain.kinds import BUILTIN_KINDS, TRIAGE

__all__ = ["BUILTIN_KINDS", "TRIAGE", "Mapper", "ssh_address", "strip_port"]

UNKNOWN_HOST = "unknown"
KIND_LABEL = "incident_kind"
HOST_LABELS = ("host", "nodename", "instance")

DEFAULT_KINDS: dict[str, str] = {
    # node_exporter's mixin
    "NodeFilesystemAlmostOutOfSpace": "disk_full",
    "NodeFilesystemSpaceFillingUp": "disk_full",
    "NodeFilesystemFilesFillingUp": "disk_full",
    "NodeFilesystemAlmostOutOfFiles": "disk_full",
    # deploy/prometheus/incident-bot-rules.yml
    "GpuHostRebooted": "vm_restart",
    "GpuHostFilesystemFull": "disk_full",
    "GpuHostInodesExhausted": "disk_full",
    "GpuMemoryHeldIdle": "vram_idle",
    # GPU health: the agent's NVML events and dcgm-exporter's rules (deploy/prometheus)
    "GpuXidCritical": "gpu_xid",
    "GpuEccUncorrectable": "gpu_ecc",
    "GpuRowRemapFailure": "gpu_ecc",
    "GpuRowRemapPending": "gpu_ecc",
    "GpuMissing": "gpu_missing",
}

_SSH_HOST = re.compile(r"^(?:[^@]+@)?(?P<host>\[[^\]]+\]|[^:]+|.*?)(?::\d{1,5})?$")


def strip_port(instance: str) -> str:
    """``10.0.0.1:9100`` → ``10.0.0.1``; ``[fe80::1]:9100`` → ``fe80::1``; bare IPv6 kept."""
    text = instance.strip()
    if "://" in text:
        text = text.split("://", 1)[1].split("/", 1)[0]
    if text.startswith("["):
        return text[1:].split("]", 1)[0]
    if text.count(":") == 1:
        return text.split(":", 1)[0]
    return text


def ssh_address(target: str) -> str:
    """The host part of ``user@host:port`` (the inventory's SSH target)."""
    match = _SSH_HOST.match(target.strip())
    host = match.group("host") if match else target
    return host.strip("[]")


class Mapper:
    """Built once per app from settings; maps labels to (host, kind)."""

    def __init__(self, kinds: Mapping[str, str] | None = None,
                 inventory: Mapping[str, str] | None = None) -> None:
        extra = dict(kinds or {})
        bad = [f"{k}: {v}" for k, v in extra.items() if not valid_kind(v)]
        if bad:
            raise ValueError(f"alerts.kinds: invalid kind name(s): {', '.join(bad)}")
        self.kinds = {**DEFAULT_KINDS, **extra}
        self.known = BUILTIN_KINDS | set(self.kinds.values())
        self.names = set(inventory or {})
        self.by_address = {ssh_address(t): name for name, t in (inventory or {}).items()}

    def kind(self, alertname: str, labels: Mapping[str, str]) -> str:
        explicit = labels.get(KIND_LABEL, "")
        if explicit:
            return explicit if explicit in self.known else TRIAGE
        return self.kinds.get(alertname, TRIAGE)

    def known_kind(self, kind: str) -> bool:
        return kind in self.known

    def host_from_labels(self, labels: Mapping[str, str]) -> str | None:
        """The first host-ish label, mapped to the inventory; None if there is none."""
        for name in HOST_LABELS:
            value = labels.get(name, "").strip()
            if value:
                return self.host(strip_port(value) if name == "instance" else value)
        return None

    def host(self, raw: str) -> str | None:
        """An inventory name for ``raw`` if one matches, else ``raw`` if it is a valid name."""
        if raw in self.names:
            return raw
        if raw in self.by_address:
            return self.by_address[raw]
        short = raw.split(".", 1)[0]
        if short in self.names and not raw.replace(".", "").isdigit():
            return short
        return raw if valid_host(raw) else None
