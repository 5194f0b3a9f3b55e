"""Proposals on a Slurm node, over real SSH against simulated hosts: the drain comes
first for a hardware fault, and a Slurm job's process is named, never offered for killing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from bot.remediation import catalog
from bot.sim.scenario import SCENARIO_DIR
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from playbooks import PlaybookOptions, run_playbook
from tests.fixtures.sim import SimFactory


def test_xid79_on_a_slurm_node_proposes_the_drain_first(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    host = sims("gpu_xid79")
    d = run_playbook(pool, host.ssh_target(), "gpu_health",
                     options=PlaybookOptions(slurm_node="gpu-04", expected_gpus=8),
                     context={"incident_id": "INC-7"})
    first = d.actions[0]
    assert first.kind == "slurm.drain"
    assert first.params["node"] == "gpu-04" and first.params["incident"] == "INC-7"
    assert first.params["reason"] == "GPU 3 broken: Xid 79 since boot: GPU has fallen off the bus"
    (command,) = catalog.plan(first.kind, first.params)
    assert command.startswith("scontrol update NodeName=gpu-04 State=DRAIN "
                              "'Reason=incident-bot INC-7: ")


def test_without_slurm_node_nothing_changes(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    host = sims("gpu_xid79")
    d = run_playbook(pool, host.ssh_target(), "gpu_health",
                     options=PlaybookOptions(expected_gpus=8))
    assert all(a.kind != "slurm.drain" for a in d.actions)


def test_healthy_slurm_node_is_not_drained(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = run_playbook(pool, sims("healthy").ssh_target(), "gpu_health",
                     options=PlaybookOptions(slurm_node="gpu-03"))
    assert all(a.kind != "slurm.drain" for a in d.actions)


def slurm_job_scenario(tmp_path: Path) -> Path:
    """The seed story, but the GPU holder is the batch step of Slurm job 4242 (alice):
    ``slurmstepd: [4242.batch]`` is its parent, as proctrack/linuxproc leaves it."""
    sc = yaml.safe_load((SCENARIO_DIR / "seed.yaml").read_text())
    holder = sc["processes"][0]
    holder.update(ppid=430, user="alice", owner={"kind": "systemd", "name": "slurmd.service"})
    sc["processes"].insert(0, {"pid": 430, "ppid": 1, "user": "root",
                               "args": "slurmstepd: [4242.batch]", "started_s_after_boot": 8,
                               "owner": {"kind": "systemd", "name": "slurmd.service"}})
    path = tmp_path / "slurm_job.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def test_a_slurm_jobs_process_is_named_and_never_offered_for_killing(
        pool: ParamikoPool, sim_factory: SimFactory, tmp_path: Path) -> None:
    host = sim_factory(slurm_job_scenario(tmp_path))
    d = run_playbook(pool, host.ssh_target(), "vram_idle",
                     options=PlaybookOptions(slurm_node="gpu-01"))
    kinds = [a.kind for a in d.actions]
    assert not [k for k in kinds if k.startswith(("process.", "systemd."))], kinds
    assert [(a.kind, a.params) for a in d.actions] == [
        ("slurm.requeue", {"node": "gpu-01", "job": "4242"}),
        ("slurm.cancel", {"node": "gpu-01", "job": "4242"})]
    assert "requeue Slurm job 4242 (alice)" in d.actions[0].reason
    job = [f for f in d.findings if f.code == "slurm.job_holder"]
    assert len(job) == 1, [f.code for f in d.findings]
    assert (job[0].evidence["job"], job[0].evidence["user"], job[0].evidence["pid"]) == \
        ("4242", "alice", 440)
    assert "Slurm job 4242 of alice" in job[0].title and "scancel 4242" in job[0].title
