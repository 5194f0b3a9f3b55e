"""``gpu.reset`` releases what holds the device, and ``act host.reboot`` waits for the host.

NVIDIA's reset refuses while a daemon keeps the device open (nvidia-persistenced,
dcgm-exporter, nvidia-fabricmanager): the action stops the ones that were active, resets,
and starts them again, also when the reset fails. A reboot is proven by a new boot id,
waited for (bounded) instead of reported as failed a second after it was sent.

Real: the sim hosts over OpenSSH sshd (their systemctl, nvidia-smi and reboot), a
``python -m bot.cli act`` process and redis-server for the CLI's audit log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bot.domain.action_result import ActionResult
from bot.remediation import Outcome, execute
from bot.remediation.reboot import read_boot_id, wait_back
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from tests.fixtures.remediation import FAST
from tests.fixtures.sim import SimFactory, one_host_config

PERSISTENCED = "nvidia-persistenced.service"
WITH_PERSISTENCED: dict[str, Any] = {
    "units": {PERSISTENCED: {
        "description": "NVIDIA Persistence Daemon",
        "exec_start": "/usr/bin/nvidia-persistenced --user nvidia-persistenced",
        "restart": "always", "active_state": "active", "unit_file_state": "enabled",
        "active_enter_s_after_boot": 5}},
    "processes": [{"pid": 610, "args": "/usr/bin/nvidia-persistenced --user nvidia-persistenced",
                   "started_s_after_boot": 5, "owner": {"kind": "systemd",
                                                        "name": PERSISTENCED}}],
}
GPU = {"count": 8, "name": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559,
       "memory_reserved_mib": 70120, "utilization_gpu": 0}


def reset(pool: ParamikoPool, sim: SimHost) -> ActionResult:
    return execute(pool, sim.ssh_target(), "gpu.reset", {"gpu": "0"}, approver="U1",
                   evidence_hash=None, audit=None, options=FAST, incident_id="INC-R")


def tool_order(sim: SimHost) -> list[str]:
    """The state-changing calls, in order: ``stop UNIT``, ``reset``, ``start UNIT``."""
    out = []
    for e in sim.command_log():
        argv = [str(a) for a in e.get("argv") or []]
        if e.get("tool") == "systemctl" and argv[:1] in (["stop"], ["start"]):
            out.append(" ".join(argv[:2]))
        elif e.get("tool") == "nvidia-smi" and "--gpu-reset" in argv:
            out.append("reset")
    return out


def unit_state(sim: SimHost, unit: str) -> str:
    return str(sim.state()["units"][unit]["active_state"])


def test_the_driver_refuses_a_reset_while_persistenced_holds_the_device(
        sim_factory: SimFactory) -> None:
    sim = sim_factory("gpu_held_no_process", overrides=WITH_PERSISTENCED)
    out = subprocess.run(sim.ssh_argv("nvidia-smi --gpu-reset -i 0"), capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 255 and "In use by another client" in out.stdout


def test_gpu_reset_stops_persistenced_around_the_reset_and_starts_it_again(
        sim_factory: SimFactory, rem_pool: ParamikoPool) -> None:
    sim = sim_factory("gpu_held_no_process", overrides=WITH_PERSISTENCED)
    result = reset(rem_pool, sim)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert tool_order(sim) == [f"stop {PERSISTENCED}", "reset", f"start {PERSISTENCED}"]
    assert unit_state(sim, PERSISTENCED) == "active"
    skipped = {r.command.split()[-1]: r.skipped for r in result.commands if r.skipped}
    assert skipped == {"dcgm-exporter.service": "dcgm-exporter.service was not installed "
                                                "before the reset",
                       "nvidia-fabricmanager.service": "nvidia-fabricmanager.service was not "
                                                       "installed before the reset"}
    assert f"stopped {PERSISTENCED} for the reset, started again: {PERSISTENCED} active" \
        in result.summary
    assert result.verification is not None
    assert result.verification.evidence["holders_restored"] == {PERSISTENCED: "active"}


def test_a_failed_reset_still_starts_persistenced_again(
        sim_factory: SimFactory, rem_pool: ParamikoPool) -> None:
    sim = sim_factory("gpu_held_no_process",
                      overrides={**WITH_PERSISTENCED, "gpus": [{**GPU, "reset_fails": True}]})
    result = reset(rem_pool, sim)
    assert result.outcome is Outcome.FAILED, result.summary
    assert "Unknown Error" in result.summary
    assert tool_order(sim) == [f"stop {PERSISTENCED}", "reset", f"start {PERSISTENCED}"]
    assert unit_state(sim, PERSISTENCED) == "active"


def act_reboot(config: Path, redis_url: str, wait_s: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url}
    return subprocess.run([sys.executable, "-m", "bot.cli", "act", "gpu-01", "host.reboot",
                           "--yes", "--wait-s", wait_s, "--config", str(config)],
                          capture_output=True, text=True, timeout=120, env=env)


def test_act_host_reboot_waits_for_a_new_boot_id(
        sim_factory: SimFactory, tmp_path: Path, redis_url: str) -> None:
    sim = sim_factory("healthy")
    before = str(sim.state()["boot"]["id"])
    config = one_host_config(tmp_path / "bot.yaml", sim)
    done = act_reboot(config, redis_url, "60")
    assert done.returncode == 0, done.stdout + done.stderr
    after = str(sim.state()["boot"]["id"])
    assert after != before
    assert "succeeded: gpu-01 back after" in done.stdout, done.stdout
    assert "with a new boot id" in done.stdout


def test_waiting_for_a_host_that_keeps_its_boot_id_ends_at_the_bound(
        sim_factory: SimFactory, rem_pool: ParamikoPool) -> None:
    sim = sim_factory("healthy")
    now = read_boot_id(rem_pool, sim.ssh_target(), 10.0)
    assert now is not None
    seen = wait_back(rem_pool, sim.ssh_target(), now, wait_s=1.0, poll_s=0.2)
    assert seen.boot_id is None and 1.0 <= seen.waited_s < 10.0
