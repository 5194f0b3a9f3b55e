"""Entry points: how the bot finds what it can be extended with, built-in and third-party
alike (errbot's backend plugin manager, with Python's own entry points).

The groups: ``incident_bot.actions`` (``bot/remediation/actions``), ``incident_bot.probes``
(``playbooks/probe_registry.py``), ``incident_bot.playbooks`` (``playbooks/registry.py``)
and ``incident_bot.chat_backends`` (``bot/chat/backends.py``). The built-in entries are
declared in ``pyproject.toml`` like anyone else's; each registry also names them in code
(a test keeps the two equal), because an editable install made before a group existed
has no entry points of ours in it: then the built-in ones are used, and logged.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

log = logging.getLogger(__name__)
DISTRIBUTION = "incident-bot"


class BadEntry(RuntimeError):
    """An entry point that does not name what its group holds."""


def declared(group: str, builtin: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, "module:attr") of every entry of ``group``: the installed ones, or the
    ``builtin`` ones plus any third-party entry when the installed metadata of this
    package predates the group."""
    found = list(entry_points(group=group))
    if not any(dist_of(ep) == DISTRIBUTION for ep in found):
        log.info("no %s entry points of %s installed (an editable install older than "
                 "them): using the built-in ones; reinstall (pip install -e .) to read them "
                 "from the package metadata", group, DISTRIBUTION)
        return [*builtin.items(), *((ep.name, ep.value) for ep in found if ep.name not in builtin)]
    return [(ep.name, ep.value) for ep in found]


def dist_of(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", "") or ""
    return name.lower().replace("_", "-")


def load(group: str, name: str, value: str) -> Any:
    """What ``value`` ("module" or "module:attr") names; ``BadEntry`` if it is not there."""
    module_name, _, attr = value.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BadEntry(f"{group} entry {name!r} = {value!r}: cannot import: {exc}") from None
    if not attr:
        return module
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise BadEntry(f"{group} entry {name!r} = {value!r}: {module_name} has no {attr}")
    return obj
