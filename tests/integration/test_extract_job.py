"""A run end to end against a real Redis, in process: submit, scan and repair, pause,
resume, cancel, failing samples, a full disk, and what the bot reads back."""

from __future__ import annotations

import contextlib
import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from bot.core.errors import UserError
from bot.core.procs import free_port
from bot.extract import alerts, job
from bot.extract.demo_data import prepare_interrupted_run
from bot.extract.spec import load_spec
from bot.jobs import queue, status
from bot.jobs.states import JobState
from storage import job_records as records
from storage import keys
from storage.jobs import JobRun, JobStore, serve_runs
from tests.fixtures.extract import Workers, assert_same_outputs, load_all, make_spec, wait_for
from tests.fixtures.need import need
from tests.helpers.extraction import reference


def test_submit_run_and_read_back(redis_bytes: Redis, redis: Redis, tmp_path: Path) -> None:
    jobs = JobStore(redis)
    spec = make_spec(tmp_path, n=50)
    job_id = queue.submit(JobStore(redis_bytes), spec, incident_id="INC-7")
    assert queue.status(jobs, job_id).state is JobState.QUEUED
    assert redis.get(keys.job_incident(job_id)) == "INC-7"
    assert job.execute(JobRun(redis_bytes, job_id)) == "completed"
    final = queue.status(jobs, job_id)
    assert (final.state, final.done, final.total, final.resumed_from) == (
        JobState.COMPLETED,
        50,
        50,
        0,
    )
    assert final.bytes_written == sum(p.stat().st_size for p in spec.output_dir.glob("*.pt"))
    assert final.computed == 50 and final.message == "started at 0/50"
    kinds = [e["type"] for e in status.progress_events(jobs, job_id)]
    assert kinds[0] == "submitted" and kinds[1] == "started" and kinds[-1] == "completed"
    first = status.progress_events(jobs, job_id)[0]["id"]
    assert [e["type"] for e in status.progress_events(jobs, job_id, first)] == kinds[1:]
    summary = status.final_summary(final)
    assert summary.startswith("t: completed 50/50 in ") and "no files repaired" in summary
    assert [s.job_id for s in queue.list_jobs(jobs, "h1")] == [job_id]
    assert queue.list_jobs(jobs, "other") == []
    with pytest.raises(UserError, match="already completed"):
        queue.pause(jobs, job_id)
    with pytest.raises(UserError, match="no such job"):
        queue.status(jobs, "ex-000000000000")


def test_resume_of_the_crashed_demo_run_repairs_and_matches(
    redis_bytes: Redis, tmp_path: Path
) -> None:
    jobs = JobStore(redis_bytes)
    spec_path = prepare_interrupted_run(tmp_path / "demo", samples=120, done_fraction=0.49)
    spec = load_spec(spec_path)
    before = len(list(spec.output_dir.glob("*.pt")))
    job_id = queue.submit(jobs, spec)
    assert job.execute(JobRun(redis_bytes, job_id)) == "completed"
    final = queue.status(jobs, job_id)
    assert final.message == (
        f"resumed at {before - 1}/120; 1 partial file removed, 1 corrupt file recomputed"
    )
    assert final.repaired == {"partial_removed": 1, "corrupt_recomputed": 1}
    assert final.resumed_from == before - 1 and final.done == 120
    assert "1 partial file removed, 1 corrupt file recomputed" in status.final_summary(final)
    want = reference(spec.output_dir, tmp_path, redis_bytes, **json.loads(spec.to_json()))
    assert_same_outputs(spec.output_dir, want)


def _burst(conn: Redis, host: str = "h1") -> None:
    """Run the queue in this process with RQ's SimpleWorker (real RQ statuses)."""
    from rq import Queue, SimpleWorker

    serve_runs(job.run)  # what `incident-bot worker` names before it forks
    SimpleWorker([Queue(keys.queue_name(host), connection=conn)], connection=conn).work(burst=True)


def test_a_run_queued_under_the_old_entry_point_still_runs(
    redis_bytes: Redis, workers: Workers, tmp_path: Path
) -> None:
    """A run an older bot queued (or RQ retries) names ``bot.extract.job.run_extraction``;
    a real worker runs it through ``storage.jobs.run_extraction`` all the same."""
    from rq.job import Job

    from storage.rq_worker import OLD_ENTRY_POINTS

    jobs = JobStore(redis_bytes)
    job_id = queue.submit(jobs, make_spec(tmp_path, n=16))
    run = Job.fetch(f"{job_id}-r1", connection=redis_bytes)
    assert list(run.args) == [job_id]  # read before the rename, which resets RQ's payload
    run.func_name = "bot.extract.job.run_extraction"
    run.save()
    assert Job.fetch(run.id, connection=redis_bytes).func_name in OLD_ENTRY_POINTS
    workers.start()
    assert wait_for(lambda: queue.status(jobs, job_id).state is JobState.COMPLETED, 90)
    assert queue.status(jobs, job_id).done == 16


def test_pause_mid_run_then_resume_finishes_exactly(redis_bytes: Redis, tmp_path: Path) -> None:
    spec = make_spec(
        tmp_path, n=300, progress_interval_s=0.1, model={"hidden": 128, "layers": 4, "heads": 4}
    )
    jobs = JobStore(redis_bytes)
    job_id = queue.submit(jobs, spec)
    asked: list[JobState] = []

    def pause_when_moving() -> None:
        wait_for(lambda: queue.status(jobs, job_id).done > 0, 30)
        asked.append(queue.pause(jobs, job_id).state)

    helper = threading.Thread(target=pause_when_moving)
    helper.start()
    _burst(redis_bytes)
    helper.join(30)
    assert asked == [JobState.RUNNING]  # asked; it stops between batches
    paused = queue.status(jobs, job_id)
    assert paused.state is JobState.PAUSED and 0 < paused.done < 300
    assert redis_bytes.get(keys.job_control(job_id)) is None
    resumed = queue.resume(jobs, job_id)
    assert (resumed.state, resumed.runs, resumed.rq_id) == (JobState.QUEUED, 2, f"{job_id}-r2")
    assert queue.resume(jobs, job_id).runs == 2  # idempotent while queued
    _burst(redis_bytes)
    final = queue.status(jobs, job_id)
    assert final.state is JobState.COMPLETED
    assert final.resumed_from >= paused.done and final.done == 300
    assert_same_outputs(
        spec.output_dir,
        reference(spec.output_dir, tmp_path, redis_bytes, **json.loads(spec.to_json())),
    )


def test_cancel_and_pause_a_queued_job(redis_bytes: Redis, tmp_path: Path) -> None:
    jobs = JobStore(redis_bytes)
    from rq.job import Job

    spec = make_spec(tmp_path, n=20)
    first, second = queue.submit(jobs, spec), queue.submit(jobs, spec)
    assert queue.cancel(jobs, first).state is JobState.CANCELLED
    assert Job.fetch(f"{first}-r1", connection=redis_bytes).get_status() == "canceled"
    assert job.execute(JobRun(redis_bytes, first)) == "cancelled"  # a stray delivery does nothing
    assert not spec.output_dir.exists()
    with pytest.raises(UserError, match="cancelled; only paused"):
        queue.resume(jobs, first)
    assert queue.pause(jobs, second).state is JobState.PAUSED
    assert job.execute(JobRun(redis_bytes, second)) == "paused"  # raced a worker: still honoured
    assert queue.resume(jobs, second).state is JobState.QUEUED
    assert job.execute(JobRun(redis_bytes, second)) == "completed"


def test_failing_sample_is_recorded_and_skipped(redis_bytes: Redis, tmp_path: Path) -> None:
    jobs = JobStore(redis_bytes)
    spec = make_spec(
        tmp_path,
        n=16,
        truncate=False,
        max_sample_tries=2,
        model={"hidden": 32, "layers": 2, "heads": 4, "max_positions": 512},
    )
    with spec.dataset.open("a") as handle:
        handle.write('{"id": "huge", "input_ids": [' + ", ".join(["7"] * 700) + "]}\n")
    job_id = queue.submit(jobs, spec)
    assert job.execute(JobRun(redis_bytes, job_id)) == "completed"
    final = queue.status(jobs, job_id)
    assert final.skipped == 1 and final.done == 16 and final.total == 17
    assert "sample huge skipped after 2 tries: IndexError" in (final.last_error or "")
    assert records.failures(redis_bytes, job_id)["huge"]["tries"] == 2
    kinds = [e["type"] for e in status.progress_events(jobs, job_id)]
    assert kinds.count("sample_failed") == 1 and kinds.count("sample_skipped") == 1
    assert "1 sample skipped" in status.final_summary(final)


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    need(proc.returncode == 0,
         f"cannot mount a tmpfs here ({proc.stderr.strip()}); the ENOSPC path is "
         "covered by the injected writer in tests/unit/test_extract_store.py")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_disk_full_pauses_the_job_and_raises_an_alert(redis_bytes: Redis, tmp_path: Path) -> None:
    jobs = JobStore(redis_bytes)
    alerts_seen: list[dict[str, Any]] = []
    with tiny_tmpfs(tmp_path / "small", "600k") as small:
        spec = make_spec(tmp_path, n=80, output_dir=str(small / "out"))
        job_id = queue.submit(jobs, spec)
        assert job.execute(JobRun(redis_bytes, job_id), on_disk_full=alerts_seen.append) == "paused"
        paused = queue.status(jobs, job_id)
        assert paused.state is JobState.PAUSED and 0 < paused.done < 80
        assert (paused.last_error or "").startswith("disk full while writing")
        assert not [p for p in (small / "out").iterdir() if p.name.endswith(".tmp")]
        assert len(load_all(small / "out")) == paused.done
    assert [a["host"] for a in alerts_seen] == ["h1"] and alerts_seen[0]["job_id"] == job_id
    assert "disk_full" in [e["type"] for e in status.progress_events(jobs, job_id)]
    assert [s.job_id for s in status.interrupted_jobs(jobs, "h1")] == [job_id]


def test_default_disk_full_hook_posts_a_generic_alert() -> None:
    got: list[tuple[str, dict[str, Any], str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            got.append((self.path, body, self.headers.get("Authorization")))
            self.send_response(202)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        alerts.configure(f"http://127.0.0.1:{server.server_port}/alerts")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("INCIDENT_BOT_ALERT_TOKEN", "tok")
            alerts.post_disk_full(
                {
                    "job_id": "ex-1",
                    "host": "gpu-01",
                    "path": "/data/out",
                    "summary": "paused: disk full",
                }
            )
    finally:
        alerts.configure(None)
        server.shutdown()
        server.server_close()
    path, body, auth = got[0]
    assert (path, auth) == ("/alerts", "Bearer tok")
    assert (body["host"], body["kind"], body["status"], body["severity"]) == (
        "gpu-01",
        "disk_full",
        "firing",
        "critical",
    )
    assert body["labels"]["job_id"] == "ex-1"
