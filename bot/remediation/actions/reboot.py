"""A host reboot (``systemctl reboot``): the last rung, and the repair of a drained node.

A reboot cannot be verified when it is sent (the SSH session may die with it): what
proves it is a new boot id once the host is back (``bot/remediation/reboot.py`` reads it;
the flow's reboot step and the CLI wait for it). Its own verification only records that
the request went out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from bot.core import strings
from bot.domain.action_result import Seen, Verification
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action
from bot.remediation.spec import RemoteStep

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun


class HostReboot(Action):
    kind = "host.reboot"
    title = strings.ACT_TITLE_REBOOT
    risk = strings.ACT_RISK_REBOOT
    reboots = True
    phrase_template = strings.MSG_ACTION_REBOOT
    done_template = strings.MSG_DONE_REBOOT

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("reboot", ("systemctl", "reboot"), 10.0),)

    def subject(self, p: Mapping[str, str], host: str) -> str:
        return host

    def clears_xids(self, p: Mapping[str, str]) -> str:
        return strings.XID_CLEARED_BY_REBOOT

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        """Proven later (host back, new boot id): this only records the request, not
        seen yet (the reboot step, or the CLI's wait, records what it sees then)."""
        return Verification(Seen.NOT_FIXED, strings.REM_REBOOT_SENT.format(host=ctx.target.name),
                            evidence={"pending": "host back with a new boot id"})
