"""Through the assembled bot (as serve runs it): an Xid 79 incident on a Slurm node whose
real job keeps running; the drain is the first proposal, approved by a signed click, and the
real controller shows the node DRAINING with the incident in its reason; the message names
the job. The job ends: the expiry tick says DRAINED in the thread and offers the reboot.
The GPU comes back with the reboot; the health gate passes; "Return gpu-01 to Slurm" is
approved and the controller shows the node IDLE with no reason.

Real: redis-server, the sim host over OpenSSH sshd, slurmctld/slurmd/munged, our service on
uvicorn. Stand-in: Slack's Web API. The tick is called as the scheduler calls it
(``timers.expire_approvals``); the scheduler itself is off in these tests.
"""

from __future__ import annotations

import json
import time
from typing import Any

from bot.config.settings import Settings
from bot.domain.findings import ProposedAction
from bot.domain.lifecycle import IncidentState as S
from bot.flow import timers
from bot.schedule.wiring import drained_source
from bot.sim.sshd import SimHost
from bot.sim.state import load_state, locked, write_state
from tests.fixtures.bots import ONCALL, Loop, loop, loop_settings, wait_until  # noqa: F401
from tests.fixtures.sim import SimFactory
from tests.fixtures.slurm import SlurmCluster


def heal(sim: SimHost) -> None:
    """The repair the reboot brings: the GPU that fell off the bus is back, and the new
    boot's kernel log has no Xid."""
    with locked(sim.workdir):
        state = load_state(sim.workdir)
        for gpu in state["gpus"]:
            gpu["lost"] = False
        state["dmesg"] = [line for line in state["dmesg"]
                          if "Xid" not in line and "fallen off" not in line]
        write_state(sim.workdir, state)


def plan_of(lp: Loop, incident_id: str, kind: str) -> str:
    """The approval id of the incident's newest plan of ``kind``."""
    plans = [p for p in lp.flow.incidents.require(incident_id).plans if p.action.kind == kind]
    assert plans, f"no {kind} plan"
    return plans[-1].approval_id


def approve(lp: Loop, incident_id: str, kind: str) -> None:
    approval = wait_until(lambda: any(p.action.kind == kind for p in
                                      lp.flow.incidents.require(incident_id).plans)
                          and plan_of(lp, incident_id, kind), 60, f"a {kind} button")
    shown = lp.wait_text(incident_id, approval)
    lp.click(ONCALL, shown, lambda el: el.get("value") == approval
               and str(el["action_id"]).startswith("approve"))


def thread(lp: Loop, incident_id: str) -> list[str]:
    """The thread as a person reads it: the message as it is now, then every reply (once
    the outbox has sent what Slack's pace held back)."""
    assert lp.flow.outbox.flush(15)
    chat = lp.flow.incidents.require(incident_id).chat
    assert chat is not None
    top = lp.standin.messages[(chat.channel, chat.ts)]
    out = ["[message] " + " | ".join(_texts(top.get("blocks") or []))]
    for call in lp.standin.calls_of("chat.postMessage"):
        if call.params.get("thread_ts") == chat.thread_ts:
            out.append("[reply] " + str(call.params.get("text") or ""))
    return out


def slash_reply(lp: Loop, needle: str) -> str:
    """The newest ``/ir`` answer (sent to the response URL) that says ``needle``."""
    def found() -> str:
        texts = [str(c.params.get("text", "")) for c in lp.standin.calls_of("response_url")]
        return next((t for t in reversed(texts) if needle in t), "")

    return str(wait_until(found, 30, f"a slash reply saying {needle!r}"))


def _texts(blocks: list[dict[str, Any]]) -> list[str]:
    out = []
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            out.append(str(text.get("text", "")))
        for el in block.get("elements") or []:
            label = el.get("text")
            out.append(f"[{label.get('text')}]" if isinstance(label, dict)
                       else str(el.get("text", "")))
        for field in block.get("fields") or []:
            out.append(str(field.get("text", "")))
    return [t for t in out if t]


def xid79_slurm_node(lp: Loop, redis_url: str, sim_factory: SimFactory,
                     slurm: SlurmCluster) -> tuple[SimHost, Settings]:
    """The Xid 79 sim host as Slurm node gpu-01: its scontrol reaches the real controller."""
    sim: SimHost = sim_factory("gpu_xid79", binds=(slurm.socket_dir,),
                               env={"SLURM_CONF": str(slurm.conf)})
    settings = loop_settings(redis_url, sim, lp.standin)
    settings.hosts["gpu-01"] = settings.hosts["gpu-01"].model_copy(
        update={"slurm_node": "gpu-01", "gpus": 8})
    return sim, settings


def test_xid79_drain_job_ends_drained_reboot_gate_return_to_slurm(
        loop: Loop, redis_url: str, sim_factory: SimFactory,  # noqa: F811
        slurm: SlurmCluster) -> None:
    sim, settings = xid79_slurm_node(loop, redis_url, sim_factory, slurm)
    job = slurm.sbatch("train-llm", minutes=90)
    bot = loop.start(settings)
    incident_id = loop.open(kind="gpu_xid")

    shown = loop.wait_text(incident_id, "rain gpu-01 in Slurm, so no new job lands on it")
    plans = loop.flow.incidents.require(incident_id).plans
    assert plans[0].action.kind == "slurm.drain"  # the first proposal, before any reset
    assert "scontrol update NodeName=gpu-01 State=DRAIN" in json.dumps(shown)
    approve(loop, incident_id, "slurm.drain")

    wait_until(lambda: slurm.state() == "ALLOCATED+DRAIN", 60, "the node DRAINING")
    assert f"Reason=incident-bot {incident_id}:" in slurm.show_node()
    assert slurm.jobs() == [job]  # nothing was killed
    text = json.dumps(loop.wait_text(incident_id, "node gpu-01 is DRAINING"))
    assert f"{job} (root, train-llm" in text, text[-3000:]
    loop.wait_state(incident_id, S.VERIFIED)
    offered = [a.kind for a in loop.flow.approvals.for_incident(incident_id) if a.is_open]
    assert "slurm.resume" not in offered  # no Revert: the node returns through the gate only
    assert "host.reboot" not in offered  # not while a job runs there

    desk, f = bot.service.desk, loop.flow
    timers.expire_approvals(desk, f.decide, f.act, f.reboots)  # still DRAINING: nothing said
    assert "is now DRAINED" not in json.dumps(thread(loop, incident_id))
    slurm.run("scancel", job)
    wait_until(lambda: slurm.state() == "IDLE+DRAIN", 30, "the node DRAINED once the job ended")
    assert f.slurm is not None and f.slurm.poll_draining() == [incident_id]
    assert f.slurm.poll_draining() == []  # said once
    assert any("gpu-01 is now DRAINED" in line and "no job runs there" in line
               for line in thread(loop, incident_id))

    heal(sim)  # the reboot brings the GPU back
    approve(loop, incident_id, "host.reboot")
    wait_until(lambda: f.incidents.require(incident_id).reboot is not None
               and f.incidents.require(incident_id).running is None, 60, "the reboot request")
    assert slurm.state() == "IDLE+DRAIN"  # still out of Slurm while the host reboots
    timers.expire_approvals(desk, f.decide, f.act, f.reboots)  # the host is back
    assert loop.state(incident_id) is S.VERIFIED
    gate = f.incidents.require(incident_id).gate
    assert gate is not None and gate.passed and gate.job == "slurm:gpu-01"
    loop.wait_text(incident_id, "Return gpu-01 to Slurm")
    assert slurm.state() == "IDLE+DRAIN"  # not before the click

    approve(loop, incident_id, "slurm.resume")
    wait_until(lambda: slurm.state() == "IDLE", 60, "the node back in Slurm")
    assert "Reason=" not in slurm.show_node() or "Reason=(null)" in slurm.show_node()
    loop.wait_text(incident_id, "node gpu-01 is IDLE")
    gates = [e.action for e in f.audit.timeline(incident_id) if e.action.startswith("gate.")]
    assert gates == ["gate.passed", "gate.passed"]  # after the reboot, and before the resume
    assert bot.sender.slash(ONCALL, "/ir", "drained").status_code == 200
    assert "No Slurm node is draining or drained." in slash_reply(loop, "Slurm node")
    print("\n".join(thread(loop, incident_id)))


def break_gpu(sim: SimHost) -> None:
    """GPU 3 falls off the bus again (the Xid is back in the kernel log)."""
    with locked(sim.workdir):
        state = load_state(sim.workdir)
        state["gpus"][3]["lost"] = True
        state["dmesg"].append("[  912.331245] NVRM: Xid (PCI:0000:5d:00): 79, pid=2211, "
                              "name=python, GPU has fallen off the bus.")
        write_state(sim.workdir, state)


def test_a_failed_gate_keeps_the_node_drained_and_says_why(
        loop: Loop, redis_url: str, sim_factory: SimFactory,  # noqa: F811
        slurm: SlurmCluster) -> None:
    sim, settings = xid79_slurm_node(loop, redis_url, sim_factory, slurm)
    bot = loop.start(settings)
    incident_id = loop.open(kind="gpu_xid")
    approve(loop, incident_id, "slurm.drain")  # no job on the node: DRAINED at once
    wait_until(lambda: slurm.state() == "IDLE+DRAIN", 60, "the node DRAINED")
    loop.wait_state(incident_id, S.VERIFIED)
    f = loop.flow
    assert f.slurm is not None
    wait_until(lambda: any(p.action.kind == "host.reboot" for p in
                           f.incidents.require(incident_id).plans), 30, "the reboot offered")
    assert f.slurm.poll_draining() == []  # already DRAINED when it verified: said once

    target = f.hosts.target_for("gpu-01")
    assert target is not None
    gate = f.slurm.after_repair(incident_id, target)  # the GPU is still off the bus
    assert gate is not None and not gate.passed
    said = json.dumps(thread(loop, incident_id))
    assert "health gate failed: gpu-01 stays drained" in said and "critical Xid" in said
    assert not any(p.action.kind == "slurm.resume"
                   for p in f.incidents.require(incident_id).plans)
    assert slurm.state() == "IDLE+DRAIN"
    assert bot.sender.slash(ONCALL, "/ir", "drained").status_code == 200
    listed = slash_reply(loop, "Drained Slurm nodes")
    assert "Drained Slurm nodes (1):" in listed and "gpu-01 DRAINED for" in listed
    assert f"by root: incident-bot {incident_id}: GPU 3 broken" in listed, listed
    (shown,) = f.slurm.drained.cached()  # what the Home tab lists (once serve passes it)
    assert (shown.name, shown.view, shown.incident, shown.by_bot) == (
        "gpu-01", "DRAINED", incident_id, True)
    assert shown.since is not None and abs(time.time() - shown.since) < 120
    digest_nodes = drained_source(settings, f.runner)  # what the scheduled digest lists
    assert digest_nodes is not None and [n.name for n in digest_nodes()] == ["gpu-01"]

    heal(sim)
    assert f.slurm.after_repair(incident_id, target) is not None
    f.publisher.publish(incident_id)  # as the reboot and act steps do after it
    loop.wait_text(incident_id, "Return gpu-01 to Slurm")
    break_gpu(sim)  # between the passed gate and the click
    approve(loop, incident_id, "slurm.resume")
    loop.wait_state(incident_id, S.ACTION_FAILED)
    assert slurm.state() == "IDLE+DRAIN"  # the resume did not run
    assert f"Reason=incident-bot {incident_id}:" in slurm.show_node()
    wait_until(lambda: "gpu-01 stays drained: the health gate failed on gpu-01"
               in json.dumps(thread(loop, incident_id)), 30, "the blocked resume said")
    assert "override" not in json.dumps(thread(loop, incident_id))  # none for a node
    actions = [e.action for e in f.audit.timeline(incident_id)]
    assert "slurm.resume_blocked" in actions
    assert not any(e.action.startswith("action.") and e.detail.get("kind") == "slurm.resume"
                   for e in f.audit.timeline(incident_id))


def test_a_verified_gpu_reset_on_a_drained_node_runs_the_gate(
        loop: Loop, redis_url: str, sim_factory: SimFactory,  # noqa: F811
        slurm: SlurmCluster) -> None:
    sim: SimHost = sim_factory("gpu_held_no_process", binds=(slurm.socket_dir,),
                               env={"SLURM_CONF": str(slurm.conf)})
    settings = loop_settings(redis_url, sim, loop.standin)
    settings.hosts["gpu-01"] = settings.hosts["gpu-01"].model_copy(
        update={"slurm_node": "gpu-01", "gpus": 8})
    loop.start(settings)
    incident_id = loop.open(kind="gpu_xid")
    approve(loop, incident_id, "slurm.drain")
    wait_until(lambda: slurm.state() == "IDLE+DRAIN", 60, "the node DRAINED")
    loop.wait_state(incident_id, S.VERIFIED)
    f = loop.flow
    reset = ProposedAction("reset-0", "gpu.reset", {"gpu": "0"}, "GPU 0 is wedged", "resets it")
    f.followups.offer(incident_id, reset, f.hosts.target_for("gpu-01"))
    f.publisher.publish(incident_id)
    approve(loop, incident_id, "gpu.reset")
    wait_until(lambda: (g := f.incidents.require(incident_id).gate) is not None
               and g.job == "slurm:gpu-01", 60, "the gate after the reset")
    gate = f.incidents.require(incident_id).gate
    assert gate is not None and not gate.passed  # GPUs 1-7 still hold memory nobody uses
    wait_until(lambda: "health gate failed: gpu-01 stays drained"
               in json.dumps(thread(loop, incident_id)), 30, "the failed gate said")
    assert not any(p.action.kind == "slurm.resume"
                   for p in f.incidents.require(incident_id).plans)
    assert slurm.state() == "IDLE+DRAIN"
