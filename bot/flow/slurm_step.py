"""The Slurm node around a repair: watched while it drains, gated before it goes back.

A verified drain leaves the node DRAINING while jobs still run there. The
expiry tick (``poll_draining``) reads the node for every open incident whose drain
verified DRAINING and, once no job runs there any more, says so in the thread
(``describe``), offers the repair (a reboot, now that nothing runs there) and re-renders.

After a verified repair (a GPU reset success, or a reboot whose host came back
healthy) ``after_repair`` runs the health gate (``Followups.after_repair``: a repair the
gate keeps out is not fixed, whether or not a node was drained); on a node this incident
drained it posts ``followup.gate_note`` and offers "Return gpu-01 to Slurm" only when the
gate passed; an approved return to Slurm runs behind the gate again (``gate_resume``), so
a node never goes back to the scheduler on a gate that failed since.

Which drain belongs to the incident is read from its audit trail (``execute`` records
every result there), so nothing new is stored on the incident.
"""

from __future__ import annotations

import logging

from bot.chat.text import escape
from bot.config.inventory import slurm_host
from bot.core import fmt, strings
from bot.domain.action_result import ActionResult, Outcome
from bot.domain.incident import Incident
from bot.domain.incident_record import StepResult
from bot.domain.slurm import DrainedNode
from bot.flow.followups import Followups, gate_job
from bot.flow.hosts import Hosts
from bot.flow.message import Publisher
from bot.flow.plans import Plans
from bot.remediation import followup
from bot.remediation.actions import find
from bot.remediation.actions.reboot import HostReboot
from bot.remediation.probe_runner import ProbeFailed
from bot.remediation.slurm import DrainedCache, describe, read_status
from bot.ssh.base import SSHError, SSHTarget
from playbooks.health_gate import GateResult
from storage.audit import AuditEntry, AuditLog
from storage.incidents import IncidentStore

log = logging.getLogger(__name__)
_DONE = frozenset(f"action.{o.value}" for o in (Outcome.SUCCEEDED, Outcome.TIMED_OUT_BUT_DONE,
                                                Outcome.NOOP))
SEEN_DRAINED = "slurm.drained_seen"  # the audit mark: the thread was told DRAINED


def _drains(kind: object) -> bool:
    known = find(str(kind or ""))
    return known is not None and known.drains


def _returns_node(kind: object) -> bool:
    known = find(str(kind or ""))
    return known is not None and known.returns_node


def latest_drain(timeline: list[AuditEntry]) -> ActionResult | None:
    """The incident's drain still in force: its newest verified drain with no verified
    return to Slurm after it (pure over the audit trail, oldest first)."""
    for entry in reversed(timeline):
        kind = entry.detail.get("kind")
        if entry.action not in _DONE or not (_drains(kind) or _returns_node(kind)):
            continue
        return ActionResult.from_dict(entry.detail) if _drains(kind) else None
    return None


def drained_seen(timeline: list[AuditEntry]) -> bool:
    """The thread was already told the node is DRAINED, after the latest drain."""
    for entry in reversed(timeline):
        if entry.action == SEEN_DRAINED:
            return True
        if entry.action in _DONE and _drains(entry.detail.get("kind")):
            return False
    return False


def drained_view(drain: ActionResult) -> str:
    """DRAINING or DRAINED, as the drain's verification last read the node."""
    ev = drain.verification.evidence if drain.verification is not None else {}
    node = ev.get("node") if isinstance(ev, dict) else None
    return str(node.get("view", "")) if isinstance(node, dict) else ""


def drained_line(node: DrainedNode, now: float) -> str:
    """One node for people: ``gpu-01 DRAINED for 2 h, by root: <reason>`` (the reason is
    the controller's text, which a person may have written: escaped)."""
    return strings.SLURM_DRAINED_LINE.format(
        node=escape(node.name), view=node.view,
        age=fmt.age(now, node.since) if node.since is not None else "an unknown time",
        who=escape(node.who), reason=escape(node.reason or "none"))


def drained_text(nodes: list[DrainedNode], now: float) -> str:
    """``/ir drained`` (pure): each node, DRAINING or DRAINED, for how long, by whom, why."""
    if not nodes:
        return strings.SLURM_DRAINED_NONE
    return "\n".join([strings.SLURM_DRAINED_HEAD.format(n=len(nodes)),
                      *(drained_line(n, now) for n in nodes)])


def drained_report(cache: DrainedCache, now: float) -> str:
    """The cluster's drained nodes, read now on the inventory's first Slurm host (one
    answers for the whole cluster); says so when there is none or Slurm cannot say."""
    if cache.target() is None:
        return strings.SLURM_DRAINED_NO_HOST
    try:
        nodes = cache.read()
    except (ProbeFailed, SSHError) as exc:
        return strings.SLURM_DRAINED_UNREADABLE.format(why=escape(str(exc))[:200])
    return drained_text(nodes, now)


def drained_cache(hosts: Hosts, timeout_s: float = 10.0) -> DrainedCache:
    """The drained nodes as the inventory's first Slurm host reports them (cached)."""
    def answering() -> SSHTarget | None:
        name = slurm_host(hosts.settings)
        return hosts.target_for(name) if name is not None else None

    return DrainedCache(hosts.runner, answering, timeout_s)


class SlurmStep:
    """Watch a drained node until it is DRAINED; gate it before it returns to Slurm."""

    def __init__(self, incidents: IncidentStore, hosts: Hosts, plans: Plans,
                 publisher: Publisher, followups: Followups, audit: AuditLog, *,
                 probe_timeout_s: float = 10.0, bot_user: str = "incident-bot") -> None:
        self.incidents = incidents
        self.hosts = hosts
        self.plans = plans
        self.publisher = publisher
        self.followups = followups
        self.audit = audit
        self.probe_timeout_s = probe_timeout_s
        self.bot_user = bot_user
        self.drained = drained_cache(hosts, probe_timeout_s)

    def drain_of(self, incident_id: str) -> ActionResult | None:
        return latest_drain(self.audit.timeline(incident_id))

    def after_drain(self, incident_id: str, result: ActionResult, target: SSHTarget) -> None:
        """A drain that verified DRAINED at once (nothing ran there): offer the repair now."""
        if result.ok and _drains(result.kind) and drained_view(result) == "DRAINED":
            self._mark_seen(incident_id, result.params["node"])
            self._offer_repair(incident_id, result, target)

    def after_repair(self, incident_id: str, target: SSHTarget,
                     since: float | None = None, by: str = "") -> GateResult:
        """The health gate on a repaired host (``Followups.after_repair``: kept out when it
        fails); on a node this incident drained, "Return to Slurm" only if it passed."""
        drain = self.drain_of(incident_id)
        node = drain.params["node"] if drain is not None else None
        gate = self.followups.after_repair(incident_id, target, since=since, node=node, by=by)
        if drain is None:
            return gate
        incident = self.incidents.require(incident_id)
        self.publisher.reply(incident, followup.gate_note(drain, gate))
        action = followup.return_to_slurm(drain, gate)
        if action is not None and not self.plans.pending(incident_id, action):
            self.plans.offer(incident_id, action, target)
        return gate

    def gate_resume(self, incident_id: str, target: SSHTarget, node: str) -> GateResult:
        """The gate again right before an approved return to Slurm (it may have been
        approved long after the gate passed); a failure is said and keeps it drained."""
        gate = self.followups.gate(incident_id, target, gate_job(node), say_failed=False)
        if not gate.passed:
            self.audit.append(incident_id, self.bot_user, "slurm.resume_blocked",
                              {"node": node, "reasons": gate.reasons[:10]})
        return gate

    def blocked_text(self, node: str, gate: GateResult) -> str:
        return strings.SLURM_RESUME_BLOCKED.format(node=node, host=gate.host,
                                                   why="; ".join(gate.reasons) or "unknown")

    def poll_draining(self) -> list[str]:
        """Every open incident whose drain verified DRAINING and whose node is DRAINED now:
        the thread says so, the repair is offered, the message re-rendered."""
        told = []
        for incident in self.incidents.list(open_only=True):
            if incident.running is not None or not self._slurm_host(incident.host):
                continue
            try:
                if self._poll_one(incident):
                    told.append(str(incident.id))
            except (ProbeFailed, SSHError) as exc:  # the next tick tries again
                log.info("slurm status of %s for %s: %s", incident.host, incident.id, exc)
        return told

    def _poll_one(self, incident: Incident) -> bool:
        timeline = self.audit.timeline(incident.id)
        drain = latest_drain(timeline)
        target = self.hosts.target_for(incident.host)
        if drain is None or target is None or drained_seen(timeline):
            return False
        status = read_status(self.hosts.runner, target, drain.params["node"],
                             self.probe_timeout_s)
        if not status.node.drained or status.node.incident != (incident.id or None):
            return False
        node = status.node.name
        self._mark_seen(incident.id, node)
        text = strings.SLURM_NOW_DRAINED.format(node=node, status=describe(status))
        incident = self.incidents.update(incident.id, lambda i: i.with_result(
            StepResult(True, text)))  # on the message too, under its results
        self.publisher.reply(incident, text)
        self._offer_repair(incident.id, drain, target)
        self.publisher.publish(incident.id)
        return True

    def _slurm_host(self, host: str) -> bool:
        entry = self.hosts.settings.hosts.get(host)
        return entry is not None and bool(entry.slurm_node)

    def _mark_seen(self, incident_id: str, node: str) -> None:
        self.audit.append(incident_id, self.bot_user, SEEN_DRAINED, {"node": node})

    def _offer_repair(self, incident_id: str, drain: ActionResult, target: SSHTarget) -> None:
        """The next rung once nothing runs on the node: reboot the host (each its own
        approval; the node returns to Slurm only through ``after_repair``)."""
        self.followups.offer_rma(incident_id, target)  # a repeat offender: RMA beside it
        node = drain.params["node"]
        action = HostReboot.propose(target.name, {}, strings.SLURM_PROPOSE_REBOOT.format(
            node=node, host=target.name))
        if not self.plans.pending(incident_id, action):
            self.plans.offer(incident_id, action, target)
