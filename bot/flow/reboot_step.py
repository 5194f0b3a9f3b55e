"""``host.reboot`` follow-through: announced, the host's other incidents marked, and the
incident re-diagnosed once the host answers with a new boot id.

A reboot cannot be verified when it is sent (the SSH session may die with it), so the
act step hands the result here: the incident stays ``remediating`` with ``Incident.reboot``
(the boot id read just before, the deadline). ``poll_reboots`` (on the scheduler's
expiry tick) reads ``/proc/sys/kernel/random/boot_id``: a new id re-runs the playbook
(``verified`` when the finding is gone, else ``action_failed`` naming what is still
there); past the deadline without a new id, ``action_failed``. Once back, the host's
other incidents marked ``Incident.host_reboot`` are re-diagnosed too (``follow_others``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import replace

from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome
from bot.domain.findings import Diagnosis, Severity
from bot.domain.incident import Incident
from bot.domain.incident_record import HostRebootMark, LastOutcome, RebootPending, StepResult
from bot.domain.lifecycle import IncidentState, can_transition
from bot.flow.context import FlowContext
from bot.flow.diagnose_step import on_incident_opened
from bot.flow.hosts import diagnose, target_for
from bot.flow.message import publish
from bot.flow.plans import withdraw_pending
from bot.flow.thread import post_in_thread
from bot.ssh.base import Command, SSHError, SSHTarget

log = logging.getLogger(__name__)
BOOT_ID_CMD = "cat /proc/sys/kernel/random/boot_id"
BACK_WITHIN_S = 900.0  # a GPU host with 8 GPUs and a slow BIOS can take ten minutes
_BOOT_ID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_NOT_SENT = frozenset({Outcome.REFUSED, Outcome.DRY_RUN, Outcome.UNREACHABLE})


def boot_id(ctx: FlowContext, target: SSHTarget) -> str | None:
    """The host's current boot id, or None when it does not answer (or answers oddly)."""
    try:
        probe = ctx.runner.run(target, Command("boot_id", BOOT_ID_CMD,
                                               ctx.remediation.probe_timeout_s))
    except SSHError:
        return None
    text = probe.stdout.strip().lower()
    return text if probe.ok and _BOOT_ID.fullmatch(text) else None


def requested(result: ActionResult) -> bool:
    """The reboot command went out: it exited 0, or the host dropped the session on it."""
    if result.kind != "host.reboot" or result.outcome in _NOT_SENT:
        return False
    sent = [c for c in result.commands if c.ran]
    return bool(sent) and all(c.exit_status in (0, None, 255) or c.timed_out for c in sent)


def on_requested(ctx: FlowContext, incident_id: str, result: ActionResult,
                 before: str | None) -> None:
    """Store the pending reboot, announce it in the thread, mark the host's other incidents."""
    incident = ctx.incidents.require(incident_id)
    now = ctx.clock()
    text = strings.FLOW_REBOOT_REQUESTED.format(host=incident.host, who=result.approver,
                                                boot=before or "unknown",
                                                mins=int(BACK_WITHIN_S // 60))
    reboot = RebootPending(before, now, now + BACK_WITHIN_S, result.approver)
    ctx.incidents.update(incident_id, lambda i: replace(
        i.with_result(StepResult(True, text)), reboot=reboot, last_outcome=LastOutcome.of(result)))
    ctx.audit.append(incident_id, result.approver, "host.reboot_requested",
                     {"host": incident.host, "boot_id": before})
    post_in_thread(ctx, incident, text)
    mark_others(ctx, incident, result.approver)


def mark_others(ctx: FlowContext, incident: Incident, who: str) -> list[str]:
    """A note and ``Incident.host_reboot`` on every other open incident of the host."""
    marked = []
    for other in ctx.incidents.list(open_only=True):
        if other.host != incident.host or other.id == incident.id:
            continue
        ctx.incidents.update(other.id, _marked(HostRebootMark(incident.id, who, ctx.clock())))
        post_in_thread(ctx, other, strings.FLOW_REBOOT_OTHER.format(
            host=incident.host, id=incident.id, who=who))
        publish(ctx, other.id)
        marked.append(str(other.id))
    return marked


def _marked(mark: HostRebootMark) -> Callable[[Incident], Incident]:
    return lambda incident: replace(incident, host_reboot=mark)


def poll_reboots(ctx: FlowContext) -> list[str]:
    """Settle every pending reboot whose host is back (or whose deadline passed)."""
    settled = []
    for incident in ctx.incidents.list(open_only=True):
        pending = incident.reboot
        if pending is None or pending.done or incident.state is not IncidentState.REMEDIATING:
            continue
        target = target_for(ctx, incident.host)
        now_id = boot_id(ctx, target) if target is not None else None
        if target is not None and now_id is not None and now_id != pending.boot_id:
            _back(ctx, incident, target, pending, now_id)
        elif ctx.clock() > pending.deadline:
            _settle(ctx, incident, pending, None, False, strings.FLOW_REBOOT_NOT_BACK.format(
                host=incident.host, mins=int(BACK_WITHIN_S // 60)))
        else:
            continue
        settled.append(str(incident.id))
    return settled


def still_there(before: Diagnosis | None, fresh: Diagnosis) -> list[str]:
    """Titles of the fresh findings whose code was a problem before the reboot (pure)."""
    codes = {f.code for f in (before.findings if before is not None else ())
             if f.severity is not Severity.INFO}
    return [f.title for f in fresh.findings
            if f.code in codes and f.severity is not Severity.INFO]


def _back(ctx: FlowContext, incident: Incident, target: SSHTarget, pending: RebootPending,
          now_id: str) -> None:
    fresh, _ = diagnose(ctx, incident, target)
    still = still_there(incident.diagnosis, fresh)
    if still:
        text = strings.FLOW_REBOOT_BACK_STILL.format(host=incident.host, boot=now_id,
                                                     still="; ".join(still)[:500])
    else:
        text = strings.FLOW_REBOOT_BACK_OK.format(host=incident.host, boot=now_id)
    _settle(ctx, incident, pending, now_id, not still, text)
    follow_others(ctx, incident, target, now_id)


def follow_others(ctx: FlowContext, incident: Incident, target: SSHTarget,
                  now_id: str) -> list[str]:
    """The host's other incidents marked for this reboot, re-diagnosed now that it is
    back: resolved when their problems are gone, else diagnosed afresh (new plans, the
    state the fresh diagnosis calls for). One with an action running is left alone."""
    followed = []
    for other in ctx.incidents.list(open_only=True):
        mark = other.host_reboot
        if (mark is None or mark.by != incident.id or mark.settled
                or other.running is not None
                or other.state in (IncidentState.APPROVED, IncidentState.REMEDIATING)):
            continue
        fresh, _ = diagnose(ctx, other, target)
        still = still_there(other.diagnosis, fresh)
        ctx.incidents.update(other.id, _marked(replace(mark, settled=True, boot_id_after=now_id)))
        _moved(ctx, other, fresh, still, now_id)
        followed.append(str(other.id))
    return followed


def _moved(ctx: FlowContext, other: Incident, fresh: Diagnosis, still: list[str],
           now_id: str) -> None:
    """Resolve ``other`` (its problems are gone) or diagnose it again from the start."""
    problems = [f.title for f in fresh.findings if f.severity is not Severity.INFO]
    gone = not problems  # the old finding gone, and nothing new in its place
    after = "gone" if gone else "still there"
    ctx.audit.append(other.id, ctx.bot_user, "host.reboot_followed",
                     {"boot_id_after": now_id, "after": after, "still": still[:10]})
    if gone:
        if not can_transition(other.state, IncidentState.RESOLVED):
            return
        withdraw_pending(ctx, other, ctx.bot_user, reason="gone after the host's reboot")
        text = strings.FLOW_REBOOT_OTHER_GONE.format(host=other.host, boot=now_id)
        ctx.incidents.update(other.id, lambda i: replace(
            i.with_result(StepResult(True, text)), diagnosis=fresh))
        ctx.incidents.transition(other.id, IncidentState.RESOLVED, ctx.bot_user, text[:200])
        post_in_thread(ctx, other, text)
        publish(ctx, other.id)
        return
    post_in_thread(ctx, other, strings.FLOW_REBOOT_OTHER_AGAIN.format(
        host=other.host, boot=now_id, still="; ".join(still or problems)[:500]))
    if can_transition(other.state, IncidentState.DIAGNOSING):
        withdraw_pending(ctx, other, ctx.bot_user, reason="diagnosing again after the reboot")
        on_incident_opened(ctx, other.id)


def _settle(ctx: FlowContext, incident: Incident, pending: RebootPending,
            now_id: str | None, ok: bool, text: str) -> None:
    done = replace(pending, done=True, boot_id_after=now_id)
    ctx.incidents.update(incident.id, lambda i: replace(
        i.with_result(StepResult(ok, text)), reboot=done))
    goal = IncidentState.VERIFIED if ok else IncidentState.ACTION_FAILED
    ctx.incidents.transition(incident.id, goal, ctx.bot_user, text[:200])
    ctx.audit.append(incident.id, ctx.bot_user, "host.reboot_settled",
                     {"boot_id_after": now_id, "ok": ok, "text": text[:500]})
    post_in_thread(ctx, incident, text)
    publish(ctx, incident.id)
