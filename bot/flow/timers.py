"""What the scheduler's leader runs for the flow: plain functions, bound in ``bot.service``.

Each takes the firing (unused) last, so ``functools.partial(fn, ...)`` is the job.
"""

from __future__ import annotations

from typing import Any

from bot.chat.interactions import ApprovalDesk
from bot.flow.act_step import ActStep
from bot.flow.decide_step import DecideStep
from bot.flow.progress_step import ProgressStep
from bot.flow.reboot_step import RebootStep


def poll_progress(progress: ProgressStep, _firing: Any = None) -> None:
    progress.poll_all()


def expire_approvals(desk: ApprovalDesk, decide: DecideStep, act: ActStep,
                     reboots: RebootStep, _firing: Any = None) -> None:
    """Expire overdue approvals (their ``click.expired`` events tell the flow), wake
    ended snoozes, read back a ``running`` marker a dead replica left outside an action
    step (an action step itself is the reconciler's: one path settles it), settle reboots
    whose host is back, and tell the threads whose drained Slurm node is DRAINED now."""
    desk.expire_due()
    decide.wake_snoozed()
    act.recover_stalled()
    reboots.poll_reboots()
    if act.slurm is not None:  # a drained node whose last job ended: DRAINED in the thread
        act.slurm.poll_draining()
