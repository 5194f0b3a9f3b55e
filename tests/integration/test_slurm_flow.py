"""Through the assembled bot (as serve runs it): an Xid 79 incident on a Slurm node whose
real job keeps running; the drain is the first proposal, approved by a signed click, and the
real controller shows the node DRAINING with the bot's reason; the message names the job.

Real: redis-server, the sim host over OpenSSH sshd, slurmctld/slurmd/munged, our service on
uvicorn. Stand-in: Slack's Web API. Not wired yet in bot/flow (so not asserted here): the
incident id in the reason, the message update on DRAINED, the gated return to Slurm.
"""

from __future__ import annotations

import json

from bot.sim.sshd import SimHost
from tests.fixtures.bots import ONCALL, Loop, loop, loop_settings, wait_until  # noqa: F401
from tests.fixtures.sim import SimFactory
from tests.fixtures.slurm import SlurmCluster


def test_xid79_alert_drain_button_drains_the_real_node_around_its_job(
        loop: Loop, redis_url: str, sim_factory: SimFactory,  # noqa: F811
        slurm: SlurmCluster) -> None:
    sim: SimHost = sim_factory("gpu_xid79", binds=(slurm.socket_dir,),
                               env={"SLURM_CONF": str(slurm.conf)})
    settings = loop_settings(redis_url, sim, loop.standin)
    settings.hosts["gpu-01"] = settings.hosts["gpu-01"].model_copy(
        update={"slurm_node": "gpu-01", "gpus": 8})
    job = slurm.sbatch("train-llm", minutes=90)
    loop.start(settings)
    incident_id = loop.open(kind="gpu_xid")

    shown = loop.wait_text(incident_id, "rain gpu-01 in Slurm, so no new job lands on it")
    plans = loop.ctx.incidents.require(incident_id).meta.get("plans") or []
    assert plans[0]["action"]["kind"] == "slurm.drain"  # the first proposal, before any reset
    approval = plans[0]["approval_id"]
    assert "scontrol update NodeName=gpu-01 State=DRAIN" in json.dumps(shown)
    loop.click(ONCALL, shown, lambda el: el.get("value") == approval
               and str(el["action_id"]).startswith("approve"))

    wait_until(lambda: slurm.state() == "ALLOCATED+DRAIN", 60, "the node DRAINING")
    assert "Reason=incident-bot" in slurm.show_node()
    assert slurm.jobs() == [job]  # nothing was killed
    text = json.dumps(loop.wait_text(incident_id, "node gpu-01 is DRAINING"))
    assert f"{job} (root, train-llm" in text, text[-3000:]
    assert loop.state(incident_id).value == "verified"
    slurm.run("scancel", job)
    wait_until(lambda: slurm.state() == "IDLE+DRAIN", 30, "the node DRAINED once the job ended")
    offered = [a.kind for a in loop.ctx.approvals.for_incident(incident_id) if a.is_open]
    assert "slurm.resume" not in offered  # no Revert: the node returns through the gate only
