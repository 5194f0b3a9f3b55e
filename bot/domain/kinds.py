"""Alert kinds and the playbook each one runs: the one map ingest and the flow share.

A kind with no playbook of its own (anything configured under ``alerts.kinds`` that is
not built in, or an unknown one) runs the generic triage playbook.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

TRIAGE = "triage"
AUTO = "auto"  # `/ir diag HOST`: the playbook the host's state calls for
DIAG_SUMMARY = "/ir diag"  # the summary of an incident a person opened with `/ir diag`
REQUESTED_BY = "requested_by"  # its label: the Slack user who asked
KIND_PLAYBOOK: Mapping[str, str] = MappingProxyType({
    AUTO: AUTO,
    "vm_restart": "vm_restart",
    "vram_idle": "vram_idle",
    "disk_full": "disk_full",
    # GPU health: the agent's NVML events and dcgm-exporter's rules (deploy/prometheus)
    "gpu_xid": "gpu_health",
    "gpu_ecc": "gpu_health",
    "gpu_missing": "gpu_health",
})
BUILTIN_KINDS = frozenset({*KIND_PLAYBOOK, TRIAGE})


def playbook_for(kind: str) -> str:
    """Unknown alert kinds get the generic triage playbook."""
    return KIND_PLAYBOOK.get(kind, TRIAGE)
