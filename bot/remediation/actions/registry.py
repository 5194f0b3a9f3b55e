"""The action registry: every action kind by name, built-in and third-party alike.

Actions register through the ``incident_bot.actions`` entry-point group: each entry is
``KIND = "module:Class"``, and the class's ``kind`` must be the entry's name. The built-in
ones are declared in ``pyproject.toml`` like any other (``BUILTIN_MODULES`` names their
modules, and a test keeps the two equal). The group is read once, on first use, and
cached: nothing is imported until an action is asked for.

An editable install made before the group existed, or before a built-in kind was added,
lacks entry points of ours; the built-in kinds it does not list are then loaded from
``BUILTIN_MODULES`` (logged: reinstall to read them from the metadata).
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Iterable
from importlib.metadata import entry_points

from bot.remediation.actions.base import Action
from bot.remediation.spec import ActionRefused

log = logging.getLogger(__name__)
GROUP = "incident_bot.actions"
DISTRIBUTION = "incident-bot"
# the modules of the built-in actions: every ``Action`` subclass defined in one is an action
# (pyproject.toml lists each as ``KIND = "module:Class"``; a test keeps the two equal)
BUILTIN_MODULES = (
    "bot.remediation.actions.systemd", "bot.remediation.actions.dropin",
    "bot.remediation.actions.process", "bot.remediation.actions.gpu_reset",
    "bot.remediation.actions.reboot", "bot.remediation.actions.journal",
    "bot.remediation.actions.disk_cleanup", "bot.remediation.actions.slurm",
    "bot.remediation.actions.extraction", "bot.remediation.actions.rma",
)


class BadAction(RuntimeError):
    """An entry point that does not name an ``Action`` of its own kind."""


def _declared() -> list[tuple[str, str]]:
    """(kind, "module:Class") for every entry of the group, and every built-in kind the
    installed metadata does not list yet (an editable install made before the group, or
    before a built-in kind was added, still runs the package's own actions)."""
    found = [(ep.name, ep.value) for ep in entry_points(group=GROUP)]
    listed = {kind for kind, _ in found}
    missing = [(k, v) for k, v in builtin_entries().items() if k not in listed]
    if missing:
        log.info("%d built-in actions are not in the installed %s entry points of %s (an "
                 "editable install older than them): loaded from the package; reinstall "
                 "(pip install -e .) to read them from the package metadata", len(missing),
                 GROUP, DISTRIBUTION)
    return [*found, *missing]


def builtin_entries() -> dict[str, str]:
    """kind → "module:Class" for every action class the built-in modules define."""
    out: dict[str, str] = {}
    for name in BUILTIN_MODULES:
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if (isinstance(cls, type) and issubclass(cls, Action) and cls.__module__ == name
                    and "kind" in vars(cls)):
                out[cls.kind] = f"{name}:{cls.__name__}"
    return out


def load_entry(kind: str, value: str) -> Action:
    module, _, name = value.partition(":")
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, Action)):
        raise BadAction(f"{GROUP} entry {kind!r} = {value!r} is not an Action class")
    if cls.kind != kind:
        raise BadAction(f"{GROUP} entry {kind!r} names {value}, whose kind is {cls.kind!r}")
    return cls()


@functools.cache
def _registry() -> dict[str, Action]:
    out: dict[str, Action] = {}
    for kind, value in _declared():
        if kind in out and f"{type(out[kind]).__module__}:{type(out[kind]).__name__}" == value:
            continue  # the same class twice (built-in fallback and a listing)
        if kind in out:
            raise BadAction(f"{GROUP}: kind {kind!r} registered twice")
        out[kind] = load_entry(kind, value)
    return out


_EXTENSION_KINDS: set[str] = set()  # registered by ``register`` (operators' ext.* kinds)


def register(classes: Iterable[type[Action]]) -> None:
    """Register actions made at start (an operator extension's ``ext.*`` kinds), replacing
    the ones registered this way before. A kind an entry point already registered is
    refused (``BadAction``): nothing replaces a built-in or a package's action."""
    reg = _registry()
    made = {cls.kind: cls() for cls in classes}
    taken = sorted(k for k in made if k in reg and k not in _EXTENSION_KINDS)
    if taken:
        raise BadAction(f"{GROUP}: kind {taken[0]!r} is registered already")
    for kind in _EXTENSION_KINDS - set(made):
        reg.pop(kind, None)
    reg.update(made)
    _EXTENSION_KINDS.clear()
    _EXTENSION_KINDS.update(made)


def get(kind: str) -> Action:
    """The action of ``kind``; ``ActionRefused`` (shown verbatim) for an unknown kind."""
    action = _registry().get(kind)
    if action is None:
        known = ", ".join(sorted(_registry()))
        raise ActionRefused(f"unknown action kind {kind!r} (known: {known})")
    return action


def find(kind: str) -> Action | None:
    """The action of ``kind``, or None (a stored record of a kind no longer installed)."""
    return _registry().get(kind)


def all_actions() -> tuple[Action, ...]:
    return tuple(_registry().values())


def kinds() -> tuple[str, ...]:
    return tuple(sorted(_registry()))


def entry_kinds() -> tuple[str, ...]:
    """The kinds the entry points registered (built-in and packages'), not extensions'."""
    return tuple(sorted(set(_registry()) - _EXTENSION_KINDS))


def where(kinds_: Iterable[str]) -> dict[str, str]:
    """kind → the module that defines it (for reports and the architecture test)."""
    reg = _registry()
    return {k: type(reg[k]).__module__ for k in kinds_ if k in reg}
