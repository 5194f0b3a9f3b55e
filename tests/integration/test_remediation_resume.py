"""extraction.resume through the catalog, on the real extraction queue in the real Redis,
and the chain after a GPU-freeing action on the seed host."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from redis import Redis

from bot.jobs import queue
from bot.remediation import ActionRefused, Outcome, RemediationOptions, chain_resumes, execute
from bot.remediation.followup import offers
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog
from storage.jobs import JobStore
from tests.fixtures.extract import make_spec


@pytest.fixture
def paused_job(tmp_path: Path, redis_bytes: Redis) -> str:
    jobs = JobStore(redis_bytes)
    job_id = queue.submit(jobs, make_spec(tmp_path, n=16), host="gpu-01")
    assert queue.pause(jobs, job_id).state.value == "paused"
    return job_id


def test_resume_requeues_a_paused_job_once_then_says_it_is_queued(
        seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        redis_bytes: Redis, audit_log: AuditLog, paused_job: str) -> None:
    options = replace(fast_options, jobs=JobStore(redis_bytes))
    first = execute(rem_pool, seed_sim.ssh_target(), "extraction.resume", {"job": paused_job},
                    approver="U0AAAAAAA", evidence_hash=None, audit=audit_log, options=options,
                    incident_id="INC-3")
    assert first.outcome is Outcome.SUCCEEDED, first.summary
    assert queue.status(JobStore(redis_bytes), paused_job).state.value == "queued"
    again = execute(rem_pool, seed_sim.ssh_target(), "extraction.resume", {"job": paused_job},
                    approver="U0AAAAAAA", evidence_hash=None, audit=audit_log, options=options,
                    incident_id="INC-3")
    assert again.outcome is Outcome.NOOP and "already queued" in again.summary
    assert seed_sim.command_log() == []  # the queue, not the host
    assert [e.action for e in audit_log.timeline("INC-3")] == [
        "action.started", "action.succeeded", "action.started", "action.noop"]


def test_resume_without_redis_is_refused_before_anything_is_audited(
        seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        audit_log: AuditLog) -> None:
    with pytest.raises(Exception, match="needs the bot's Redis"):
        execute(rem_pool, seed_sim.ssh_target(), "extraction.resume", {"job": "ex-0123456789ab"},
                approver="U0AAAAAAA", evidence_hash=None, audit=audit_log,
                options=fast_options, incident_id="INC-4")
    assert audit_log.timeline("INC-4") == []
    with pytest.raises(ActionRefused):
        execute(rem_pool, seed_sim.ssh_target(), "extraction.resume", {"job": "../x"},
                approver="U0AAAAAAA", evidence_hash=None, audit=None, options=fast_options)


def test_freeing_the_gpus_offers_the_resume_and_chains_it_when_configured(
        seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions,
        redis_bytes: Redis, audit_log: AuditLog, paused_job: str) -> None:
    options = replace(fast_options, jobs=JobStore(redis_bytes), chain_resume=True)
    target = seed_sim.ssh_target()
    freed = execute(rem_pool, target, "systemd.stop_disable",
                    {"unit": "vllm-kimi-k25-int4.service"}, approver="U0AAAAAAA",
                    evidence_hash=None, audit=audit_log, options=options, incident_id="INC-5")
    assert freed.outcome is Outcome.SUCCEEDED
    offered = [(a.kind, a.params) for a in offers(freed, [paused_job])]
    assert offered[1:] == [("extraction.resume", {"job": paused_job}),  # then the lasting fix
                           ("systemd.dropin", {"unit": "vllm-kimi-k25-int4.service",
                                               "timeout_stop_s": "30",
                                               "marker": "/run/incident-bot/gpu-reservation"})]
    chained = chain_resumes(rem_pool, target, freed, [paused_job], options=options,
                            audit=audit_log)
    assert [r.outcome for r in chained] == [Outcome.SUCCEEDED]
    assert queue.status(JobStore(redis_bytes), paused_job).state.value == "queued"
    assert chain_resumes(rem_pool, target, freed, [paused_job],
                         options=replace(options, chain_resume=False), audit=audit_log) == []
