"""The Slurm fixture itself: a real controller and node on loopback, in seconds."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.fixtures.slurm import SlurmCluster, start_cluster


def test_node_is_idle_and_runs_a_real_job(slurm: SlurmCluster) -> None:
    assert slurm.state() == "IDLE"
    job = slurm.sbatch("fixture-check")
    assert slurm.jobs() == [job]
    assert slurm.state() == "ALLOCATED"


def test_drain_and_resume_round_trip(slurm: SlurmCluster) -> None:
    slurm.run("scontrol", "update", f"NodeName={slurm.node}", "State=DRAIN", "Reason=fixture")
    assert slurm.state() == "IDLE+DRAIN"
    assert "Reason=fixture [root@" in slurm.show_node()
    slurm.reset()
    assert "Reason=" not in slurm.show_node()


def test_a_fresh_cluster_starts_within_ten_seconds(tmp_path: Path,
                                                   slurm_cluster: SlurmCluster) -> None:
    """A second cluster next to the session's one: its own ports, socket and files."""
    t0 = time.monotonic()
    other = start_cluster(tmp_path, node="gpu-02")
    try:
        took = time.monotonic() - t0
        assert other.state() == "IDLE"
        assert other.conf != slurm_cluster.conf
    finally:
        other.stop()
    assert took < 10.0, f"start took {took:.1f} s"


@pytest.mark.parametrize("key", ["AuthInfo=socket=", "NodeAddr=127.0.0.1", "ReturnToService=2"])
def test_generated_conf(slurm_cluster: SlurmCluster, key: str) -> None:
    assert key in slurm_cluster.conf.read_text()
