"""Real RQ worker processes, SIGKILLed at random moments: the job still finishes exactly.

Each kill is by PID: the worker (its horse must die with it, and another worker must
pick the run up after RQ's abandoned-run cleanup) or the work horse alone (its worker
hands the run straight to ``Retry``). The final files must equal an uninterrupted run's
tensor for tensor.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from functools import partial
from pathlib import Path

from redis import Redis
from rq.job import Job

from bot.extract.spec import ExtractionSpec, eagle3_layers
from bot.extract.store import Expect, verify_file
from bot.jobs import queue, status
from bot.jobs.states import JobState
from storage import job_records as records
from storage.jobs import JobStore
from tests.fixtures.extract import (
    Workers,
    assert_same_outputs,
    make_spec,
    process_gone,
    wait_for,
)
from tests.helpers.extraction import reference

N_KILL = 300
SEED = int(os.environ.get("EXTRACT_KILL_SEED", random.randrange(1 << 30)))


def _busy_worker(workers: Workers) -> tuple[subprocess.Popen[bytes], int] | None:
    for proc in workers.procs:
        if proc.poll() is None and (horse := workers.horse_of(proc)) is not None:
            return proc, horse
    return None


def _await_busy(workers: Workers, timeout_s: float) -> tuple[subprocess.Popen[bytes], int]:
    """The worker with a live work horse, waited for: between two batches of a run, or
    while a kill is being recovered from, no worker may have one for a moment."""
    found: list[tuple[subprocess.Popen[bytes], int]] = []

    def busy() -> bool:
        got = _busy_worker(workers)
        found[:] = [got] if got is not None else []
        return got is not None

    assert wait_for(busy, timeout_s), "no worker is running the job"
    return found[0]


def _kill(workers: Workers, target: str, rng: random.Random) -> float:
    """Kill the busy worker or its horse; return when (monotonic) it died."""
    _await_busy(workers, 30)
    time.sleep(rng.uniform(0.0, 0.25))  # a random moment inside the batch loop
    while True:  # the horse seen may end before the signal: look again, never assume
        proc, horse = _await_busy(workers, 30)
        if target == "worker":
            workers.kill(proc)
            killed_at = time.monotonic()
            gone = partial(process_gone, horse)
            assert wait_for(gone, 2.0), "work horse outlived its worker"
            workers.start()  # what systemd's Restart=on-failure does
            return killed_at
        try:
            os.kill(horse, signal.SIGKILL)
        except ProcessLookupError:
            continue
        return time.monotonic()


def _starts(conn: Redis, job_id: str) -> int:
    """How many runs got as far as marking the job running."""
    return int(records.read(conn, job_id).get("starts", "0"))


def _done_at_least(conn: Redis, job_id: str, threshold: float) -> bool:
    return queue.status(JobStore(conn), job_id).done >= threshold


def _moving_again(conn: Redis, job_id: str, before: int, workers: Workers) -> bool:
    return queue.status(JobStore(conn), job_id).done > before and _busy_worker(workers) is not None


def _dones(conn: Redis, job_id: str) -> list[int]:
    kinds = {"started", "resumed", "progress", "completed"}
    events = [e for e in status.progress_events(JobStore(conn), job_id) if e["type"] in kinds]
    return [int(e["done"]) for e in events]


def test_kills_at_random_moments_do_not_change_the_output(
    redis_bytes: Redis, workers: Workers, tmp_path: Path
) -> None:
    jobs = JobStore(redis_bytes)
    rng = random.Random(SEED)
    spec = make_spec(
        tmp_path, n=N_KILL, model={"hidden": 64, "layers": 4, "heads": 4}, progress_interval_s=0.1
    )
    workers.start()
    workers.start()
    job_id = queue.submit(jobs, spec)
    plan = ["worker", "horse", "worker", "horse"]
    thresholds = sorted(rng.uniform(0.05, 0.75) * N_KILL for _ in plan)
    back_after: list[float] = []
    for target, threshold in zip(plan, thresholds, strict=True):
        assert wait_for(partial(_done_at_least, redis_bytes, job_id, threshold), 60), target
        before = queue.status(jobs, job_id).done
        killed_at = _kill(workers, target, rng)
        moving = partial(_moving_again, redis_bytes, job_id, before, workers)
        assert wait_for(moving, 60), f"no progress after {target} kill"
        back_after.append(time.monotonic() - killed_at)
    assert wait_for(lambda: queue.status(jobs, job_id).state is JobState.COMPLETED, 90)
    final = queue.status(jobs, job_id)
    redone = final.computed - final.total
    print(
        f"seed={SEED} back_after={[round(s, 1) for s in back_after]} redone={redone} "
        f"starts={_starts(redis_bytes, job_id)}"
    )
    # at-least-once delivery, exactly-once data: same tensors as an uninterrupted run
    assert_same_outputs(
        spec.output_dir,
        reference(spec.output_dir, tmp_path, redis_bytes, **json.loads(spec.to_json())),
    )
    assert all(verify_file(p, _expect(spec)) is None for p in spec.output_dir.glob("*.pt"))
    dones = _dones(redis_bytes, job_id)
    assert dones == sorted(dones) and dones[-1] == N_KILL, "progress went backwards"
    # overlap keeps one batch in the writers and one being computed: at most two per kill
    assert 0 <= redone <= 2 * spec.batch_size * len(plan)
    assert 2 <= _starts(redis_bytes, job_id) <= 1 + len(plan)
    assert final.runs == 1  # every restart was RQ's Retry of the same run


def _expect(spec: ExtractionSpec) -> Expect:
    import torch

    return Expect(len(eagle3_layers(spec.model.layers)), spec.model.hidden, torch.float32)


def test_vm_restart_leaves_an_interrupted_job_that_queue_resume_finishes(
    redis_bytes: Redis, workers: Workers, tmp_path: Path
) -> None:
    jobs = JobStore(redis_bytes)
    spec = make_spec(
        tmp_path, n=200, model={"hidden": 64, "layers": 4, "heads": 4}, progress_interval_s=0.1
    )
    only = workers.start()
    job_id = queue.submit(jobs, spec)
    assert wait_for(lambda: queue.status(jobs, job_id).done >= 30, 60)
    horse = workers.horse_of(only)
    workers.kill(only)  # the VM dies: no worker left to notice
    assert horse is not None and wait_for(lambda: process_gone(horse), 2.0)
    assert wait_for(
        lambda: [s.job_id for s in status.interrupted_jobs(jobs, "h1")] == [job_id], 15
    )
    stuck = queue.status(jobs, job_id)
    assert stuck.state is JobState.INTERRUPTED and stuck.rate is None
    resumed = queue.resume(jobs, job_id)
    assert (resumed.state, resumed.runs) == (JobState.QUEUED, 2)
    workers.start()
    assert wait_for(lambda: queue.status(jobs, job_id).state is JobState.COMPLETED, 60)
    final = queue.status(jobs, job_id)
    assert final.resumed_from >= stuck.done and final.done == 200
    # the abandoned first run was taken away from RQ: its cleanup never reran it
    assert Job.fetch(f"{job_id}-r1", connection=redis_bytes).get_status() == "canceled"
    assert _starts(redis_bytes, job_id) == 2
    assert_same_outputs(
        spec.output_dir,
        reference(spec.output_dir, tmp_path, redis_bytes, **json.loads(spec.to_json())),
    )


def test_a_job_that_keeps_killing_its_horse_fails_with_the_reason(
    redis_bytes: Redis, workers: Workers, tmp_path: Path
) -> None:
    jobs = JobStore(redis_bytes)
    spec = make_spec(
        tmp_path, n=20, extractor="tests.fixtures.extract:suicidal_extractor", retries=2
    )
    workers.start()
    job_id = queue.submit(jobs, spec)
    assert wait_for(lambda: queue.status(jobs, job_id).state is JobState.FAILED, 60)
    failed = queue.status(jobs, job_id)
    assert "Work-horse terminated unexpectedly" in (failed.last_error or "")
    assert "signal 9" in (failed.last_error or "")
    assert _starts(redis_bytes, job_id) == 3  # the first run and 2 retries
    assert job_id in [s.job_id for s in status.interrupted_jobs(jobs, "h1")]
    assert "Work-horse terminated" in status.final_summary(failed)
