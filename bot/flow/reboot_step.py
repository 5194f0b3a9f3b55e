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
import time
from collections.abc import Callable
from dataclasses import replace

from bot.core import strings
from bot.domain.action_result import ActionResult, Outcome, Seen, Verification
from bot.domain.findings import Diagnosis, Severity
from bot.domain.incident import Incident
from bot.domain.incident_record import HostRebootMark, LastOutcome, RebootPending, StepResult
from bot.domain.lifecycle import IncidentState, can_transition
from bot.flow.diagnose_step import DiagnoseStep
from bot.flow.hosts import Hosts
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.flow.slurm_step import SlurmStep
from bot.remediation.actions.reboot import HostReboot
from bot.remediation.reboot import BOOT_ID_CMD as BOOT_ID_CMD
from bot.remediation.reboot import read_boot_id
from bot.remediation.reboot import requested as requested
from bot.ssh.base import SSHRunner, SSHTarget
from storage.audit import AuditLog
from storage.incidents import IncidentStore

log = logging.getLogger(__name__)
BACK_WITHIN_S = 900.0  # a GPU host with 8 GPUs and a slow BIOS can take ten minutes


def still_there(before: Diagnosis | None, fresh: Diagnosis) -> list[str]:
    """Titles of the fresh findings whose code was a problem before the reboot (pure)."""
    codes = {f.code for f in (before.findings if before is not None else ())
             if f.severity is not Severity.INFO}
    return [f.title for f in fresh.findings
            if f.code in codes and f.severity is not Severity.INFO]


def rebooted(last: LastOutcome | None, now_id: str | None, ok: bool,
             text: str) -> LastOutcome | None:
    """The reboot's result as it was seen once the host was back (the problem gone:
    fixed; still there: not fixed) or never came back (could not check)."""
    result = last.result if last is not None else None
    if result is None:
        return last
    seen = Seen.COULD_NOT_CHECK if now_id is None else Seen.of(ok)
    outcome = {Seen.FIXED: Outcome.SUCCEEDED, Seen.NOT_FIXED: Outcome.FAILED,
               Seen.COULD_NOT_CHECK: Outcome.COULD_NOT_CHECK}[seen]
    why = text if seen is Seen.COULD_NOT_CHECK else ""
    verification = Verification(seen, text, evidence={"boot_id_after": now_id}, why=why)
    return LastOutcome.of(replace(result, outcome=outcome, summary=text,
                                  verification=verification))


def _marked(mark: HostRebootMark) -> Callable[[Incident], Incident]:
    return lambda incident: replace(incident, host_reboot=mark)


class RebootStep:
    """A sent reboot: announced, waited for (a new boot id), re-diagnosed, settled."""

    def __init__(self, incidents: IncidentStore, hosts: Hosts, runner: SSHRunner,
                 plans: Plans, publisher: Publisher, audit: AuditLog, diagnose: DiagnoseStep,
                 *, probe_timeout_s: float = 10.0, bot_user: str = "incident-bot",
                 clock: Callable[[], float] = time.time, slurm: SlurmStep | None = None) -> None:
        self.incidents = incidents
        self.hosts = hosts
        self.runner = runner
        self.plans = plans
        self.publisher = publisher
        self.audit = audit
        self.diagnose = diagnose
        self.probe_timeout_s = probe_timeout_s
        self.bot_user = bot_user
        self.clock = clock
        self.slurm = slurm  # a node this incident drained is gated once the host is back

    def boot_id(self, target: SSHTarget) -> str | None:
        """The host's current boot id, or None when it does not answer (or answers oddly)."""
        return read_boot_id(self.runner, target, self.probe_timeout_s)

    def on_requested(self, incident_id: str, result: ActionResult,
                     before: str | None) -> None:
        """Store the pending reboot, announce it in the thread, mark the host's other incidents."""
        incident = self.incidents.require(incident_id)
        now = self.clock()
        text = strings.FLOW_REBOOT_REQUESTED.format(host=incident.host, who=result.approver,
                                                    boot=before or "unknown",
                                                    mins=int(BACK_WITHIN_S // 60))
        reboot = RebootPending(before, now, now + BACK_WITHIN_S, result.approver)
        self.incidents.update(incident_id, lambda i: replace(
            i.with_result(StepResult(True, text)), reboot=reboot,
            last_outcome=LastOutcome.of(result)))
        self.audit.append(incident_id, result.approver, "host.reboot_requested",
                          {"host": incident.host, "boot_id": before})
        self.publisher.reply(incident, text)
        self.mark_others(incident, result.approver)

    def mark_others(self, incident: Incident, who: str) -> list[str]:
        """A note and ``Incident.host_reboot`` on every other open incident of the host."""
        marked = []
        for other in self.incidents.list(open_only=True):
            if other.host != incident.host or other.id == incident.id:
                continue
            mark = HostRebootMark(incident.id, who, self.clock())
            self.incidents.update(other.id, _marked(mark))
            self.publisher.reply(other, strings.FLOW_REBOOT_OTHER.format(
                host=incident.host, id=incident.id, who=who))
            self.publisher.publish(other.id)
            marked.append(str(other.id))
        return marked

    def poll_reboots(self) -> list[str]:
        """Settle every pending reboot whose host is back (or whose deadline passed)."""
        settled = []
        for incident in self.incidents.list(open_only=True):
            pending = incident.reboot
            if (pending is None or pending.done
                    or incident.state is not IncidentState.REMEDIATING):
                continue
            target = self.hosts.target_for(incident.host)
            now_id = self.boot_id(target) if target is not None else None
            if target is not None and now_id is not None and now_id != pending.boot_id:
                self._back(incident, target, pending, now_id)
            elif self.clock() > pending.deadline:
                self._settle(incident, pending, None, False,
                             strings.FLOW_REBOOT_NOT_BACK.format(
                                 host=incident.host, mins=int(BACK_WITHIN_S // 60)))
            else:
                continue
            settled.append(str(incident.id))
        return settled

    def _back(self, incident: Incident, target: SSHTarget, pending: RebootPending,
              now_id: str) -> None:
        fresh = self.hosts.diagnose(incident, target)
        still = still_there(incident.diagnosis, fresh)
        if still:
            text = strings.FLOW_REBOOT_BACK_STILL.format(host=incident.host, boot=now_id,
                                                         still="; ".join(still)[:500])
        else:
            text = strings.FLOW_REBOOT_BACK_OK.format(host=incident.host, boot=now_id)
        self._settle(incident, pending, now_id, not still, text)
        if not still and self.slurm is not None:  # back with proof: the gate, from the boot
            self.slurm.after_repair(incident.id, target, since=None,
                                    by=HostReboot().clears_xids({}))
            self.publisher.publish(incident.id)  # with "Return to Slurm" when it passed
        self.follow_others(incident, target, now_id)

    def follow_others(self, incident: Incident, target: SSHTarget,
                      now_id: str) -> list[str]:
        """The host's other incidents marked for this reboot, re-diagnosed now that it is
        back: resolved when their problems are gone, else diagnosed afresh (new plans, the
        state the fresh diagnosis calls for). One with an action running is left alone."""
        followed = []
        for other in self.incidents.list(open_only=True):
            mark = other.host_reboot
            if (mark is None or mark.by != incident.id or mark.settled
                    or other.running is not None
                    or other.state in (IncidentState.APPROVED, IncidentState.REMEDIATING)):
                continue
            fresh = self.hosts.diagnose(other, target)
            still = still_there(other.diagnosis, fresh)
            settled = replace(mark, settled=True, boot_id_after=now_id)
            self.incidents.update(other.id, _marked(settled))
            self._moved(other, fresh, still, now_id)
            followed.append(str(other.id))
        return followed

    def _moved(self, other: Incident, fresh: Diagnosis, still: list[str],
               now_id: str) -> None:
        """Resolve ``other`` (its problems are gone) or diagnose it again from the start."""
        problems = [f.title for f in fresh.findings if f.severity is not Severity.INFO]
        gone = not problems  # the old finding gone, and nothing new in its place
        after = "gone" if gone else "still there"
        self.audit.append(other.id, self.bot_user, "host.reboot_followed",
                          {"boot_id_after": now_id, "after": after, "still": still[:10]})
        if gone:
            if not can_transition(other.state, IncidentState.RESOLVED):
                return
            self.plans.withdraw_pending(other, self.bot_user,
                                        reason="gone after the host's reboot")
            text = strings.FLOW_REBOOT_OTHER_GONE.format(host=other.host, boot=now_id)
            self.incidents.update(other.id, lambda i: replace(
                i.with_result(StepResult(True, text)), diagnosis=fresh))
            self.incidents.transition(other.id, IncidentState.RESOLVED, self.bot_user, text[:200])
            self.publisher.reply(other, text)
            self.publisher.publish(other.id)
            return
        self.publisher.reply(other, strings.FLOW_REBOOT_OTHER_AGAIN.format(
            host=other.host, boot=now_id, still="; ".join(still or problems)[:500]))
        if can_transition(other.state, IncidentState.DIAGNOSING):
            self.plans.withdraw_pending(other, self.bot_user,
                                        reason="diagnosing again after the reboot")
            self.diagnose.on_opened(other.id)

    def _settle(self, incident: Incident, pending: RebootPending,
                now_id: str | None, ok: bool, text: str) -> None:
        done = replace(pending, done=True, boot_id_after=now_id)
        self.incidents.update(incident.id, lambda i: replace(
            i.with_result(StepResult(ok, text)), reboot=done,
            last_outcome=rebooted(i.last_outcome, now_id, ok, text)))
        goal = IncidentState.VERIFIED if ok else IncidentState.ACTION_FAILED
        self.incidents.transition(incident.id, goal, self.bot_user, text[:200])
        self.audit.append(incident.id, self.bot_user, "host.reboot_settled",
                          {"boot_id_after": now_id, "ok": ok, "text": text[:500]})
        self.publisher.reply(incident, text)
        self.publisher.publish(incident.id)
