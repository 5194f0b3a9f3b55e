"""What the scheduler's leader runs for the flow: plain functions, bound in ``bot.service``.

Each takes the firing (unused) last, so ``functools.partial(fn, ctx)`` is the job.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bot.chat.interactions import ApprovalDesk
from bot.flow import progress_step
from bot.flow.act_step import recover_stalled
from bot.flow.context import FlowContext
from bot.flow.decide_step import wake_snoozed
from bot.flow.reboot_step import poll_reboots


def poll_progress(ctx: FlowContext, _firing: Any = None) -> None:
    progress_step.poll_all(ctx)


def expire_approvals(desk: ApprovalDesk, ctx: FlowContext, _firing: Any = None) -> None:
    """Expire overdue approvals (the desk tells the flow), wake ended snoozes, fail
    actions a dead replica left running, and settle reboots whose host is back."""
    desk.expire_due()
    wake_snoozed(ctx)
    recover_stalled(ctx)
    poll_reboots(ctx)


def digest_now(ctx: FlowContext) -> None:
    """``/ir digest now``: the same runner as the scheduled digest, in the incident channel."""
    from bot.schedule.wiring import build_digest_runner  # matplotlib: only when asked

    out = Path(tempfile.gettempdir()) / "incident-bot-digests"
    build_digest_runner(ctx.settings, ctx.redis, ctx.chat, out).now(ctx.channel)
