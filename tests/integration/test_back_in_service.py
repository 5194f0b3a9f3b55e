"""Back in service only with proof, through ``serve`` against the real Slurm controller.

1. A drained node whose GPU came back with a reboot still fails the gate's level 2 (dcgmi
   diag -r 2 finds the memory bad): it stays drained with that evidence and the incident is
   not fixed; once DCGM passes, the gate reaches level 3, "Return gpu-01 to Slurm" is
   offered, approved, run behind the gate again, and the controller shows the node IDLE.
2. A node whose GPU falls off the bus again after a passed gate is a repeat offender: the
   new incident proposes the RMA hand-off after the drain, the node goes on the RMA list,
   a reboot that brings the GPU back does not return it (no Return button, the incident not
   fixed), the hand-off collects nvidia-bug-report.sh and keeps the evidence bundle, and the
   digest lists the node.

Real: redis-server, the sim host over OpenSSH sshd (its scontrol reaching the real
slurmctld), our service on uvicorn. Stand-in: Slack's Web API. The expiry tick is called
as the scheduler calls it (``timers.expire_approvals``).
"""

from __future__ import annotations

import json
from typing import Any

from bot.config.settings import Settings
from bot.digest.render import rma_line
from bot.domain.lifecycle import IncidentState as S
from bot.flow import timers
from bot.sim.sshd import SimHost
from bot.sim.state import load_state, locked, write_state
from tests.fixtures.bots import ONCALL, Bot, Loop, loop, loop_settings, wait_until  # noqa: F401
from tests.fixtures.sim import SimFactory
from tests.fixtures.slurm import SlurmCluster

STRICT = {"gate": {"required": ["readings", "dcgm", "smoke"]}}  # every level must run and pass
DCGM_BAD = {"installed": True, "failures": [
    {"level": 2, "test": "memory", "gpus": [3], "warning": "DBE detected on GPU 3"}]}


def edit(sim: SimHost, change: Any) -> None:
    with locked(sim.workdir):
        state = load_state(sim.workdir)
        change(state)
        write_state(sim.workdir, state)


def heal(state: dict[str, Any]) -> None:
    """What the reboot brings: the GPU back, a kernel log without the Xid."""
    for gpu in state["gpus"]:
        gpu["lost"] = False
    state["dmesg"] = [x for x in state["dmesg"] if "Xid" not in x and "fallen off" not in x]


def break_again(state: dict[str, Any]) -> None:
    state["gpus"][3]["lost"] = True
    state["dmesg"].append("[  912.331245] NVRM: Xid (PCI:0000:5d:00): 79, pid=2211, "
                          "name=python, GPU has fallen off the bus.")


def node(lp: Loop, redis_url: str, sim_factory: SimFactory, slurm: SlurmCluster,
         dcgm: dict[str, Any]) -> tuple[SimHost, Settings]:
    sim: SimHost = sim_factory("gpu_xid79", binds=(slurm.socket_dir,),
                               env={"SLURM_CONF": str(slurm.conf)}, overrides={"dcgm": dcgm})
    settings = loop_settings(redis_url, sim, lp.standin, STRICT)
    settings.hosts["gpu-01"] = settings.hosts["gpu-01"].model_copy(
        update={"slurm_node": "gpu-01", "gpus": 8})
    return sim, settings


def plans_of(lp: Loop, incident_id: str, kind: str) -> list[str]:
    """The incident's open approvals of ``kind`` (the diagnosis's own reboot, withdrawn when
    the drain was approved, stays among the plans; the one offered after the drain is open)."""
    return [p.approval_id for p in lp.flow.incidents.require(incident_id).plans
            if p.action.kind == kind and (a := lp.flow.approvals.get(p.approval_id))
            is not None and a.is_open]


def approve(lp: Loop, incident_id: str, kind: str) -> None:
    approval = wait_until(lambda: (ids := plans_of(lp, incident_id, kind)) and ids[-1], 60,
                          f"a {kind} button")
    shown = lp.wait_text(incident_id, approval)
    lp.click(ONCALL, shown, lambda el: el.get("value") == approval
             and str(el["action_id"]).startswith("approve"))


def drain_and_reboot(lp: Loop, bot: Bot, incident_id: str, sim: SimHost,
                     slurm: SlurmCluster) -> None:
    """Drain (nothing runs: DRAINED at once), then the reboot that heals the GPU, then the
    tick that sees the host back (and runs the gate)."""
    approve(lp, incident_id, "slurm.drain")
    wait_until(lambda: slurm.state() == "IDLE+DRAIN", 60, "the node DRAINED")
    f = lp.flow
    wait_until(lambda: plans_of(lp, incident_id, "host.reboot"), 30, "the reboot offered")
    edit(sim, heal)
    approve(lp, incident_id, "host.reboot")
    wait_until(lambda: f.incidents.require(incident_id).reboot is not None
               and f.incidents.require(incident_id).running is None, 60, "the reboot request")
    timers.expire_approvals(bot.service.desk, f.decide, f.act, f.reboots)


def thread(lp: Loop, incident_id: str) -> str:
    assert lp.flow.outbox.flush(15)
    chat = lp.flow.incidents.require(incident_id).chat
    assert chat is not None
    return json.dumps([c.params.get("text") for c in lp.standin.calls_of("chat.postMessage")
                       if c.params.get("thread_ts") == chat.thread_ts], ensure_ascii=False)


def levels(lp: Loop, incident_id: str) -> list[tuple[str, str]]:
    gate = lp.flow.incidents.require(incident_id).gate
    assert gate is not None
    return [(lv["level"], lv["status"]) for lv in gate.levels]


def test_a_node_returns_to_slurm_only_after_every_configured_level_passed(
        loop: Loop, redis_url: str, sim_factory: SimFactory,  # noqa: F811
        slurm: SlurmCluster) -> None:
    sim, settings = node(loop, redis_url, sim_factory, slurm, DCGM_BAD)
    bot = loop.start(settings)
    incident_id = loop.open(kind="gpu_xid", labels={"xid": "79", "gpu": "3"})
    drain_and_reboot(loop, bot, incident_id, sim, slurm)

    f = loop.flow
    (xid,) = f.incidents.require(incident_id).xids
    assert (xid.xid, xid.cleared_by) == (79, "the reboot")  # said: the reboot cleared it
    f.publisher.publish(incident_id)
    loop.wait_text(incident_id, "cleared by the reboot at")
    assert levels(loop, incident_id) == [("readings", "passed"), ("dcgm", "failed"),
                                         ("smoke", "not_reached")]
    assert f.incidents.require(incident_id).state is S.ACTION_FAILED  # not fixed
    said = thread(loop, incident_id)
    assert "health gate failed: gpu-01 stays drained" in said
    assert "dcgmi diag -r 2: memory failed on GPU 3: DBE detected on GPU 3" in said
    assert not plans_of(loop, incident_id, "slurm.resume")
    assert slurm.state() == "IDLE+DRAIN"

    edit(sim, lambda st: st["dcgm"].update(failures=[]))  # the part was reseated
    target = f.hosts.target_for("gpu-01")
    assert target is not None and f.slurm is not None
    gate = f.slurm.after_repair(incident_id, target)  # as the next tick would, then render
    f.publisher.publish(incident_id)
    assert gate.passed and gate.reached == 3, gate.reasons
    assert slurm.state() == "IDLE+DRAIN"  # not before the click
    approve(loop, incident_id, "slurm.resume")
    wait_until(lambda: slurm.state() == "IDLE", 60, "the node back in Slurm")
    gates = [(e.action, e.detail.get("reached")) for e in f.audit.timeline(incident_id)
             if e.action.startswith("gate.")]
    assert gates == [("gate.failed", 1), ("gate.passed", 3), ("gate.passed", 3)]


def test_a_fault_back_after_a_passed_gate_goes_to_rma_not_back_to_work(
        loop: Loop, redis_url: str, sim_factory: SimFactory,  # noqa: F811
        slurm: SlurmCluster) -> None:
    sim, settings = node(loop, redis_url, sim_factory, slurm, {"installed": True})
    bot = loop.start(settings)
    f = loop.flow
    first = loop.open(kind="gpu_xid")
    drain_and_reboot(loop, bot, first, sim, slurm)
    assert levels(loop, first) == [("readings", "passed"), ("dcgm", "passed"),
                                   ("smoke", "passed")]
    approve(loop, first, "slurm.resume")
    wait_until(lambda: slurm.state() == "IDLE", 60, "the node back in Slurm")
    loop.wait_state(first, S.VERIFIED)
    f.incidents.transition(first, S.RESOLVED, ONCALL, "back in service")

    edit(sim, break_again)  # two days later in the story: the same GPU falls off again
    again = loop.open(kind="gpu_xid")
    loop.wait_state(again, S.AWAITING_APPROVAL)
    stored = f.incidents.require(again)
    assert [p.action.kind for p in stored.plans][:2] == ["slurm.drain", "rma.handoff"]
    assert stored.diagnosis is not None
    repeat = next(x for x in stored.diagnosis.findings if x.code == "node.repeat_offender")
    assert repeat.title.startswith("gpu-01 is a repeat offender: GPU 3 (5D:00.0) fell off the "
                                   "bus (Xid 79) — back ")
    assert f.followups.offence("gpu-01") is not None  # on the RMA list

    drain_and_reboot(loop, bot, again, sim, slurm)  # the reboot brings the GPU back again
    gate = f.incidents.require(again).gate
    assert gate is not None and not gate.passed and gate.reached == 3  # every level passed...
    assert "is on the RMA list" in gate.reasons[0]  # ...and still it stays out
    assert f.incidents.require(again).state is S.ACTION_FAILED
    assert not plans_of(loop, again, "slurm.resume") and slurm.state() == "IDLE+DRAIN"

    approve(loop, again, "rma.handoff")
    bundle = wait_until(lambda: next((e.detail for e in f.audit.timeline(again)
                                      if e.action == "rma.bundle"), None), 90, "the RMA bundle")
    assert bundle["bug_report"]["path"] == f"/var/log/incident-bot/rma-{again}.log.gz"
    assert bundle["bug_report"]["bytes"] > 0
    assert bundle["repeat_offence"]["before"] == first
    assert [g["reached"] for g in bundle["gates"]] == [3]
    assert "RMA evidence for gpu-01 kept with this incident" in thread(loop, again)
    offences = tuple(o for o in [f.followups.offence("gpu-01")] if o is not None)
    assert rma_line(offences, offences[0].again_at + 60).startswith(
        "Sent to RMA (a fault back after a passed health gate): gpu-01: "
        "gpu.broken:0000:5d:00 again ")
