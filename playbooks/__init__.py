"""Diagnostic playbooks: probes (a command and a pure parser) plus rules that turn parsed
facts into findings and proposed actions.

Public API (others import from here):
    run_playbook(runner, target, name, *, options=None, context=None) -> Diagnosis
    PlaybookOptions, names(), probe_gpus(runner, target) -> list[GpuSample]
Parsers for reuse: ``playbooks.parsers.nvidia.parse_query_gpu`` / ``parse_compute_apps``,
``playbooks.parsers.systemd.parse_show``.
"""

from __future__ import annotations

from playbooks.base import PlaybookOptions
from playbooks.gpu import QUERY_GPU_COMMAND, probe_gpus
from playbooks.registry import AUTO, UnknownPlaybook, names
from playbooks.runner import run_playbook, unreachable_finding

__all__ = ["AUTO", "QUERY_GPU_COMMAND", "PlaybookOptions", "UnknownPlaybook", "names",
           "probe_gpus", "run_playbook", "unreachable_finding"]
