"""The action catalog: every command the bot may run to change a host, and nothing else.

Chat and the CLI name an action kind and typed parameters; they never send a command.
The kinds are the registered actions (``bot/remediation/actions``: one class per kind,
owning its parameters and their grammar, its steps, verification and words); this module
is the one way commands are made from them. Each parameter is checked against its
grammar before it can reach a command line, and every argument is ``shlex.quote``d
anyway. ``plan`` gives the exact text that will be sent, which is what the approver sees
and what ``deploy/sudoers/incident-bot`` allows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from bot.remediation.actions import registry
from bot.remediation.actions.base import Action
from bot.remediation.actions.dropin import dropin_diff as dropin_diff
from bot.remediation.actions.dropin import dropin_path as dropin_path
from bot.remediation.spec import SUDO as SUDO
from bot.remediation.spec import ActionRefused as ActionRefused
from bot.remediation.spec import ParamSpec as ParamSpec
from bot.remediation.spec import RemoteStep as RemoteStep
from bot.ssh.base import SSHTarget


class _Catalog(Mapping[str, Action]):
    """Every registered action by kind (read-only; loaded on first use)."""

    def __getitem__(self, kind: str) -> Action:
        action = registry.find(kind)
        if action is None:
            raise KeyError(kind)
        return action

    def __iter__(self) -> Iterator[str]:
        return iter(registry.kinds())

    def __len__(self) -> int:
        return len(registry.kinds())


CATALOG: Mapping[str, Action] = _Catalog()


def get(kind: str) -> Action:
    """The action of ``kind``; ``ActionRefused`` naming the known kinds otherwise."""
    return registry.get(kind)


def steps(kind: str, params: Mapping[str, object]
          ) -> tuple[Action, dict[str, str], tuple[RemoteStep, ...]]:
    """Validate and render in one go: the only way commands are made."""
    action = get(kind)
    clean = action.validate(params)
    return action, clean, action.render(clean)


def plan(kind: str, params: Mapping[str, object], target: SSHTarget | None = None) -> list[str]:
    """The exact commands an action may run on ``target``, in order (what chat shows).

    Steps whose effect already holds are skipped at run time; nothing else is added.
    """
    action, clean, _ = steps(kind, params)
    return action.plan(clean, target)


def parse_params(pairs: list[str]) -> dict[str, str]:
    """CLI ``key=value`` words to a dict; validation happens in the action."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ActionRefused(f"expected key=value, got {pair!r}")
        if key in out:
            raise ActionRefused(f"parameter {key!r} given twice")
        out[key] = value
    return out
