"""A wedged host whose dcgm-exporter runs as a Docker container, through ``serve``.

The driver refuses a reset while the container keeps /dev/nvidia* open ("In use by another
client"), so a reset that only knows ``dcgm-exporter.service`` is refused before it runs,
naming the container and proposing the reset that stops it. The diagnosis itself proposes
that reset: every GPU (all 8 are wedged), the container and nvidia-persistenced stopped
around it and started again. Approved by a signed click, it runs in that order, the GPUs
are free, both daemons are back, and the health gate (readings, dcgmi diag -r 1 and -r 2,
the CUDA smoke) passes before the incident says Fixed.

Real: redis-server, the sim host over OpenSSH sshd (its docker, systemctl, lsof, dcgmi and
nvidia-smi shims), our service on uvicorn. Stand-in: Slack's Web API.
"""

from __future__ import annotations

import json
import subprocess

from bot.domain.action_result import Outcome
from bot.domain.lifecycle import IncidentState as S
from bot.remediation import execute
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from tests.fixtures.bots import ONCALL, Loop, loop, loop_settings, wait_until  # noqa: F401
from tests.fixtures.remediation import FAST
from tests.fixtures.sim import SimFactory

BOX = "dcgm-exporter"
PERSISTENCED = "nvidia-persistenced.service"


def state_changes(sim: SimHost) -> list[str]:
    """docker/systemctl stop and start, and the reset, in the order the host saw them."""
    out = []
    for e in sim.command_log():
        argv = [str(a) for a in e.get("argv") or []]
        if e.get("tool") in ("docker", "systemctl") and argv[:1] in (["stop"], ["start"]):
            out.append(f"{e['tool']} {' '.join(argv[:2])}")
        elif e.get("tool") == "nvidia-smi" and "--gpu-reset" in argv:
            out.append("nvidia-smi " + " ".join(argv))
    return out


def container(sim: SimHost) -> dict[str, object]:
    return next(c for c in sim.state()["containers"] if c["name"] == BOX)


def test_a_reset_that_does_not_know_the_container_is_refused_before_it_runs(
        sim_factory: SimFactory, rem_pool: ParamikoPool) -> None:
    sim = sim_factory("gpu_wedged_dcgm_container")
    raw = subprocess.run(sim.ssh_argv("nvidia-smi --gpu-reset -i 0"), capture_output=True,
                         text=True, timeout=30)
    assert raw.returncode == 255 and "In use by another client" in raw.stdout  # the driver
    ran = state_changes(sim)
    result = execute(rem_pool, sim.ssh_target(), "gpu.reset", {"gpu": "0"}, approver="U1",
                     evidence_hash=None, audit=None, options=FAST, incident_id="INC-D")
    assert result.outcome is Outcome.REFUSED, result.summary
    assert "dcgm-exporter (container) also hold /dev/nvidia*" in result.summary
    ((alt,),) = [tuple(p for p in result.proposals if p["kind"] == "gpu.reset")]
    assert alt["params"] == {"gpu": "0", "release": f"container:{BOX}|unit:{PERSISTENCED}"}
    assert state_changes(sim) == ran  # the bot ran nothing


def test_the_proposed_reset_clears_the_device_and_the_gate_proves_it(
        loop: Loop, redis_url: str, sim_factory: SimFactory) -> None:  # noqa: F811
    sim = sim_factory("gpu_wedged_dcgm_container")
    settings = loop_settings(redis_url, sim, loop.standin)
    settings.hosts["gpu-01"] = settings.hosts["gpu-01"].model_copy(update={"gpus": 8})
    loop.start(settings)
    incident_id = loop.open(kind="vram_idle")
    loop.wait_state(incident_id, S.AWAITING_APPROVAL)
    plans = loop.flow.incidents.require(incident_id).plans
    reset = next(p for p in plans if p.action.kind == "gpu.reset")
    assert reset.action.params == {"gpu": "all", "release": f"container:{BOX}|unit:{PERSISTENCED}"}
    shown = loop.wait_text(incident_id, reset.approval_id)
    said = json.dumps(shown)
    assert "docker stop dcgm-exporter" in said and "nvidia-smi --gpu-reset" in said
    before = container(sim)["pid"]
    loop.click(ONCALL, shown, lambda el: el.get("value") == reset.approval_id
               and str(el["action_id"]).startswith("approve"))

    incident = wait_until(lambda: (i := loop.flow.incidents.require(incident_id)).gate
                          and i.running is None and i, 90, "the reset and its health gate")
    assert incident.state is S.VERIFIED, incident.last_outcome
    assert state_changes(sim) == [
        f"docker stop {BOX}", f"systemctl stop {PERSISTENCED}", "nvidia-smi --gpu-reset",
        f"systemctl start {PERSISTENCED}", f"docker start {BOX}"]
    state = sim.state()
    assert [g["memory_reserved_mib"] for g in state["gpus"]] == [0] * 8  # verified free
    assert container(sim)["running"] and container(sim)["pid"] != before  # started again
    assert state["units"][PERSISTENCED]["active_state"] == "active"
    gate = incident.gate
    assert gate is not None and gate.passed and gate.reached == 3 and gate.job == "repair"
    assert [(lv["level"], lv["status"]) for lv in gate.levels] == [
        ("readings", "passed"), ("dcgm", "passed"), ("smoke", "passed")]
    assert [r["run"] for r in gate.levels[1]["evidence"]["runs"]] == [1, 2]
    audit = [e.action for e in loop.flow.audit.timeline(incident_id)]
    assert "gate.passed" in audit and "repair.kept_out" not in audit
    verified = wait_until(lambda: "Fixed" in json.dumps(loop.message(incident_id)), 30,
                          "the message to say Fixed")
    assert verified
