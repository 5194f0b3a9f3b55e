"""Diagnostic playbooks: probes (a command and a pure parser) plus rules that turn parsed
facts into findings and proposed actions.

Public API (others import from here):
    run_playbook(runner, target, name, *, options=None, context=None) -> Diagnosis
    PlaybookOptions, names(), probe_gpus(runner, target) -> list[GpuSample]
Parsers for reuse: ``playbooks.parsers.nvidia.parse_query_gpu`` / ``parse_compute_apps``,
``playbooks.parsers.systemd.parse_show``.

The names are loaded on first use (PEP 562): importing a probe or a parser
(``playbooks.probes``, as remediation does) does not load the rules, whose proposals name
remediation's actions.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playbooks.base import PlaybookOptions
    from playbooks.gpu import QUERY_GPU_COMMAND, probe_gpus
    from playbooks.registry import AUTO, UnknownPlaybook, names
    from playbooks.runner import run_playbook, unreachable_finding

_WHERE = {"PlaybookOptions": "playbooks.base", "QUERY_GPU_COMMAND": "playbooks.gpu",
          "probe_gpus": "playbooks.gpu", "AUTO": "playbooks.registry",
          "UnknownPlaybook": "playbooks.registry", "names": "playbooks.registry",
          "run_playbook": "playbooks.runner", "unreachable_finding": "playbooks.runner"}

__all__ = ["AUTO", "QUERY_GPU_COMMAND", "PlaybookOptions", "UnknownPlaybook", "names",
           "probe_gpus", "run_playbook", "unreachable_finding"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'playbooks' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
