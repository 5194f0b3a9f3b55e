"""The health gate over real SSH: a broken GPU blocks a resume (the real extraction queue
in the real Redis) and says why, an override runs it; the seed story passes once the idle
server is stopped (and fails on memory before)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from redis import Redis

from bot.jobs import queue
from bot.remediation import RemediationOptions, execute
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from playbooks import PlaybookOptions
from playbooks.health_gate import dcgm_failures, gated, run_gate
from storage.audit import AuditLog
from storage.jobs import JobStore
from tests.fixtures.extract import make_spec
from tests.fixtures.sim import SimFactory

FAST = PlaybookOptions(samples=2, sample_interval_s=0.1, command_timeout_s=4.0, expected_gpus=8)
NEED_MIB = 60 * 1024  # the extraction's model needs 60 GB on every GPU


@pytest.fixture
def pool() -> Iterator[ParamikoPool]:
    p = ParamikoPool(SSHSettings(connect_timeout_s=2.0))
    yield p
    p.close()


def test_broken_gpu_fails_the_gate_with_every_reason(pool: ParamikoPool,
                                                     sim_factory: SimFactory) -> None:
    host = sim_factory("gpu_xid79")
    gate = run_gate(pool, host.ssh_target(), need_mib=NEED_MIB, options=FAST)
    assert not gate.passed
    assert gate.checks["no critical Xid"] is False and gate.checks["nvidia-smi"] is False
    assert gate.checks["gpu count"] is True  # the lost GPU is named, not missing
    assert "critical Xid since boot on 0000:5d:00" in gate.reasons
    assert "GPU 3 is broken" in gate.reasons
    assert gate.message.startswith("Health gate failed on gpu-04: ")
    assert "The resume is blocked" in gate.message


def test_seed_story_fails_on_memory_then_passes_after_the_stop(
        pool: ParamikoPool, sim_factory: SimFactory) -> None:
    host = sim_factory("seed")
    before = run_gate(pool, host.ssh_target(), need_mib=NEED_MIB, options=FAST)
    assert not before.passed and before.checks["free memory"] is False
    assert before.reasons[0] == "GPU 0 has 19.8 GiB free, the job needs 60.0 GiB"
    stop = subprocess.run(host.ssh_argv("systemctl stop vllm-kimi-k25-int4.service"),
                          capture_output=True, text=True, timeout=30)
    assert stop.returncode == 0, stop.stderr
    after = run_gate(pool, host.ssh_target(), need_mib=NEED_MIB, options=FAST)
    assert after.passed, after.reasons
    assert after.message.startswith("Health gate passed on gpu-01: gpu count, nvidia-smi")
    assert "dcgmi diag -r 1" not in after.checks  # DCGM is not installed on the sim host


def test_dcgm_failed_rows() -> None:
    table = ("| Diagnostic                | Result                         |\n"
             "| Blacklist                 | Pass                           |\n"
             "| NVML Library              | Pass                           |\n"
             "| Environment Variables     | Fail                           |\n"
             "| PCIe                      | Fail - GPU: 3                  |\n")
    assert dcgm_failures(table) == ["Environment Variables", "PCIe"]
    assert dcgm_failures("dcgmi: not installed\n") is None


def test_failed_gate_blocks_the_real_resume_and_an_override_runs_it(
        sim_factory: SimFactory, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        redis_bytes: Redis, audit_log: AuditLog, tmp_path: Path) -> None:
    jobs = JobStore(redis_bytes)
    job = queue.submit(jobs, make_spec(tmp_path, n=8), host="gpu-04")
    assert queue.pause(jobs, job).state.value == "paused"
    host = sim_factory("gpu_xid79")
    options = replace(fast_options, jobs=JobStore(redis_bytes))

    def resume() -> object:
        return execute(rem_pool, host.ssh_target(), "extraction.resume", {"job": job},
                       approver="U0AAAAAAA", evidence_hash=None, audit=audit_log,
                       options=options, incident_id="INC-9")

    gate = run_gate(rem_pool, host.ssh_target(), need_mib=NEED_MIB, options=FAST)
    blocked = gated(gate, resume)
    assert not blocked.ran and queue.status(jobs, job).state.value == "paused"
    assert audit_log.timeline("INC-9") == []  # nothing ran, nothing audited as started
    assert "critical Xid since boot on 0000:5d:00" in blocked.gate.message
    forced = gated(gate, resume, override_by="U0BBBBBBB")
    assert forced.ran and forced.override_by == "U0BBBBBBB"
    assert queue.status(jobs, job).state.value == "queued"
