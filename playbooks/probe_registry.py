"""Named probes: every probe an operator's finding may name, built-in and third-party alike.

Registered through the ``incident_bot.probes`` entry points: each entry names a function
that takes no argument and returns a ``playbooks.base.Probe`` (a command and the pure
parser of its output), or a ``Probe`` itself. The built-in ones (``playbooks/probes.py``)
are declared in ``pyproject.toml`` like a third party's. An extension's finding
(``docs/extending.md``) names its probe by the entry's name: one of its file's own
``probes:`` or one of these; an extension's probe never takes a name registered here.
"""

from __future__ import annotations

import functools
from typing import Any

from bot.core import plugins
from playbooks.base import Probe

GROUP = "incident_bot.probes"
# pyproject.toml declares the same entries (a test keeps the two equal)
BUILTIN: dict[str, str] = {name: f"playbooks.probes:{name}" for name in (
    "boots", "clock", "compute_apps", "deleted_open_files", "df", "df_inodes", "dmesg_tail",
    "failed_units", "gpu_device_users", "gpu_memory", "gpu_xml", "memory", "mount_options",
    "pid_units", "previous_boot_tail", "processes", "shm_usage", "slurm_nodes", "unit_files",
    "units", "uptime")}


class UnknownProbe(KeyError):
    pass


@functools.cache
def entries() -> dict[str, str]:
    """name -> "module:function" of every registered probe (read once)."""
    found: dict[str, str] = {}
    for name, value in plugins.declared(GROUP, BUILTIN):
        if name in found and found[name] != value:
            raise plugins.BadEntry(f"{GROUP}: probe {name!r} registered twice")
        found[name] = value
    return found


def names() -> tuple[str, ...]:
    return tuple(sorted(entries()))


def get(name: str) -> Probe[Any]:
    """The probe registered as ``name``; ``UnknownProbe`` when there is none."""
    if name not in entries():
        raise UnknownProbe(name)
    found = plugins.load(GROUP, name, entries()[name])
    probe = found() if callable(found) and not isinstance(found, Probe) else found
    if not isinstance(probe, Probe):
        raise plugins.BadEntry(f"{GROUP} entry {name!r} does not give a Probe")
    return probe
