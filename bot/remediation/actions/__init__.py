"""Actions: one class per kind (``base.Action``), registered by name through the
``incident_bot.actions`` entry points (``registry``).

``get(kind)`` is the action (``ActionRefused`` for an unknown kind), ``find(kind)`` the
action or None, ``all_actions()`` every one. Each built-in kind lives in its family's
module: ``systemd`` (stop/disable, mask, force-mask, revert), ``dropin``, ``process``
(terminate, SIGTERM, SIGKILL), ``gpu_reset``, ``reboot``, ``journal``, ``disk_cleanup``,
``slurm`` (drain, resume, requeue, cancel), ``extraction`` (resume, override). Nothing
outside an action's own module names its kind as a string (``tests/test_architecture.py``).
"""

from __future__ import annotations

from bot.domain.headline import Fixes
from bot.remediation.actions.base import Action, ActionParams, Refusal
from bot.remediation.actions.registry import all_actions, find, get, kinds


def fixes_of(kind: str) -> Fixes | None:
    """Which finding an action of ``kind`` can be shown to fix (the headline's rule)."""
    action = find(kind)
    return action.fixes if action is not None else None


__all__ = ["Action", "ActionParams", "Fixes", "Refusal", "all_actions", "find", "fixes_of",
           "get", "kinds"]
