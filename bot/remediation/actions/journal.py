"""Vacuum the systemd journal down to a size (``journalctl --vacuum-size``): what a full
``/``, ``/var`` or ``/var/log`` gets first. Verified on the journal's size after it:
within the limit, or at least smaller than before."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

from pydantic import BeforeValidator

from bot.core import fmt, strings
from bot.domain import validate
from bot.domain.action_result import Seen, Verification
from bot.domain.headline import Fixes
from bot.domain.host_state import CapturedState
from bot.remediation.actions.base import Action, ActionParams, ParamHelp
from bot.remediation.readings import read_journal_bytes
from bot.remediation.spec import RemoteStep
from playbooks.parsers.common import size_bytes

if TYPE_CHECKING:
    from bot.remediation.polling import ActionRun


class JournalParams(ActionParams):
    size: Annotated[str, BeforeValidator(validate.size),
                    ParamHelp("journal size to keep, e.g. 500M")]


class JournalVacuum(Action):
    kind = "disk.journal_vacuum"
    title = strings.ACT_TITLE_JOURNAL
    risk = strings.ACT_RISK_JOURNAL
    Params = JournalParams
    fixes = Fixes.JOURNAL
    phrase_template = strings.MSG_ACTION_JOURNAL
    done_template = strings.MSG_DONE_JOURNAL

    def render(self, p: Mapping[str, str]) -> tuple[RemoteStep, ...]:
        return (RemoteStep("vacuum", ("journalctl", f"--vacuum-size={p['size']}"), 120.0),)

    def capture_journal(self) -> bool:
        return True

    def verify(self, ctx: ActionRun, captured: CapturedState, patient: bool = True
               ) -> Verification:
        start = time.monotonic()
        after = read_journal_bytes(ctx.runner, ctx.target, ctx.options.probe_timeout_s)
        limit = size_bytes(ctx.params["size"]) or 0
        before = captured.journal_bytes
        ok = after is not None and (after <= limit or (before is not None and after < before))
        detail = strings.REM_JOURNAL.format(before=fmt.size(before), after=fmt.size(after),
                                            limit=ctx.params["size"])
        ev = {"before_bytes": before, "after_bytes": after, "limit_bytes": limit}
        return Verification(Seen.of(ok), detail, time.monotonic() - start, evidence=ev)
