"""`incident-bot act HOST disk.cleanup ...` protects what the flow protects: the output
dirs of the host's unfinished jobs, read from the queue at act time, as well as the
inventory's allowed prefixes.

Real: a `python -m bot.cli act` process, redis-server (the extraction queue and the audit
log), the sim host over OpenSSH sshd with real (sparse) files in its sandbox root.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from redis import Redis

from bot.jobs import queue
from bot.sim import sandbox
from bot.sim.sshd import SimHost
from storage.jobs import JobStore
from tests.fixtures.extract import make_spec
from tests.fixtures.need import need
from tests.fixtures.sim import one_host_config

PAUSED = "/data/jobs/job-paused"
PAUSED_FILE = f"{PAUSED}/out/checkpoints/run-p/step-1.pt"
OLD = "/data/checkpoints/run-a/step-1000.pt"


@pytest.fixture
def full(sim_factory: Callable[..., SimHost]) -> SimHost:
    need(sandbox.available(), "sim sandbox needs root and unshare")
    return sim_factory("disk_full_ml")


@pytest.fixture
def config(tmp_path: Path, full: SimHost) -> Path:
    return one_host_config(tmp_path / "bot.yaml", full,
                           allowed_path_prefixes=["/data", "/var"])


def act(config: Path, redis_url: str, *params: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url}
    return subprocess.run([sys.executable, "-m", "bot.cli", "act", "gpu-01", "disk.cleanup",
                           *params, "--yes", "--config", str(config)],
                          capture_output=True, text=True, timeout=120, env=env)


def exists(sim: SimHost, path: str) -> bool:
    out = subprocess.run(sim.ssh_argv(f"test -f {path} && echo yes || echo no"),
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip() == "yes"


def test_the_cli_refuses_to_delete_a_paused_jobs_output(
        full: SimHost, config: Path, redis_url: str, redis_bytes: Redis,
        tmp_path: Path) -> None:
    jobs = JobStore(redis_bytes)
    job_id = queue.submit(jobs, make_spec(tmp_path, n=8, output_dir=PAUSED),
                          host="gpu-01")
    assert queue.pause(jobs, job_id).state.value == "paused"

    done = act(config, redis_url, f"paths={PAUSED_FILE}|{OLD}", "need_bytes=0")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{PAUSED_FILE} is in {PAUSED}" in done.stdout, done.stdout
    assert "nothing was changed" in done.stdout
    assert exists(full, PAUSED_FILE) and exists(full, OLD)

    alone = act(config, redis_url, f"paths={OLD}", "need_bytes=0")  # the same CLI, same job
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert not exists(full, OLD) and exists(full, PAUSED_FILE)


def test_without_the_job_the_same_paths_go(
        full: SimHost, config: Path, redis_url: str, redis_bytes: Redis) -> None:
    done = act(config, redis_url, f"paths={PAUSED_FILE}|{OLD}", "need_bytes=0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not exists(full, PAUSED_FILE) and not exists(full, OLD)
