"""A simulated host's file writes land in its private overlay root, never on this disk.

Remediation now writes files on hosts (systemd drop-ins, disk cleanup deletes); on a
sim host those commands really run, so the sim must contain them. Each test puts a
canary on the real disk and has the sim try to remove or overwrite it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.sim import sandbox
from bot.sim.sshd import SimHost
from tests.fixtures.need import need
from tests.fixtures.sim import SimFactory


def ssh(host: SimHost, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(host.ssh_argv(command), capture_output=True, text=True, timeout=30)


@pytest.fixture
def boxed(sim_factory: SimFactory) -> SimHost:
    need(sandbox.available(), "sim sandbox needs root and unshare")
    return sim_factory("seed", overrides={"files": [
        {"path": "/data/cache/blob.bin", "size": "3G", "age_days": 10}]})


def test_rm_of_a_real_path_leaves_the_real_file(boxed: SimHost, tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("keep me")
    out = ssh(boxed, f"rm -f {canary}; test -e {canary} && echo there || echo gone")
    assert out.stdout.strip() == "gone"  # the sim saw its own copy go
    assert canary.read_text() == "keep me"


def test_redirections_and_dropins_stay_in_the_sandbox(boxed: SimHost) -> None:
    dropin = Path("/etc/systemd/system/ib-sandbox-probe.service.d/50-incident-bot.conf")
    out = ssh(boxed, f"mkdir -p {dropin.parent} && echo '[Service]' > {dropin} && cat {dropin}")
    assert out.stdout.strip() == "[Service]"
    assert not dropin.parent.exists()


def test_scenario_files_exist_only_inside(boxed: SimHost) -> None:
    out = ssh(boxed, "stat -c '%s' /data/cache/blob.bin")
    assert out.stdout.strip() == str(3 * 1024 ** 3)
    assert not Path("/data/cache/blob.bin").exists()


def test_state_is_still_shared_with_the_test(boxed: SimHost) -> None:
    ssh(boxed, "systemctl stop vllm-kimi-k25-int4.service")
    assert boxed.state()["units"]["vllm-kimi-k25-int4.service"]["active_state"] == "inactive"
