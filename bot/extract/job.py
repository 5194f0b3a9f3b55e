"""The job body: one run of an extraction, from scan-and-repair to a final state.

``run(record)`` is what the work horse runs (``storage/jobs.py`` ``run_extraction``, RQ's
entry point, builds the record from the run's connection and calls it); ``execute`` is
the same run with its side effects passed in (benchmarks and tests call it directly).
Everything the run reads and writes about its job goes through the ``RunRecord`` it is
given (``bot/extract/record.py``), so every retry and resume reads the submitted spec,
and a run ends in ``completed``, ``paused`` (asked, or disk full) or ``cancelled``; a
crash raises and the queue's retry runs it again.
"""

from __future__ import annotations

import logging
import resource
import socket
import time
from typing import Any

import torch

from bot.core import strings
from bot.core.errors import UserError
from bot.domain.jobs import JobState
from bot.extract import alerts, guard
from bot.extract.dataset import survey
from bot.extract.extractors import DTYPES, load_extractor
from bot.extract.record import RunRecord
from bot.extract.reporter import Reporter
from bot.extract.runner import Hooks, Runner, RunOutcome
from bot.extract.spec import ExtractionSpec, spec_from_json
from bot.extract.store import Expect, SaveFn, ScanReport, save_atomic, scan

log = logging.getLogger(__name__)
LEASE_WAIT_S = 600.0


def run(record: RunRecord) -> str:
    """The work horse's body. Installs the parent-death guard first: never an orphan run."""
    parent = guard.expected_parent()
    if parent is not None:
        guard.install(parent)
    return execute(record)


def execute(
    record: RunRecord,
    *,
    on_disk_full: alerts.DiskFullHook | None = None,
    save: SaveFn = save_atomic,
) -> str:
    """One run; returns the state it ended in."""
    fields = record.read()
    if not fields:
        raise UserError(strings.EXTRACT_NO_SUCH_JOB.format(job=record.job_id), 2)
    spec = spec_from_json(fields["spec"])
    if fields.get("state") in (JobState.COMPLETED, JobState.CANCELLED):
        return fields["state"]  # a stray duplicate delivery of a finished job
    request = record.control()
    if request in ("pause", "cancel"):
        return _stopped(record, request)
    lease = record.lease(max(5.0, 4 * spec.progress_interval_s))
    _mark_running(record)
    lease.wait_for(LEASE_WAIT_S, on_wait=lambda: record.write(updated_at=time.time()))
    reporter = Reporter(record, interval_s=spec.progress_interval_s, lease=lease).start()
    try:
        outcome = _run(record, spec, reporter, save)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
        record.write(last_error=error)
        record.event("error", error=error)
        raise
    finally:
        snap = reporter.close()
        lease.release()
    return _finish(record, spec, outcome, snap, on_disk_full or alerts.post_disk_full)


def _mark_running(record: RunRecord) -> None:
    now = f"{time.time():.3f}"
    record.write(
        state=JobState.RUNNING.value,
        started_at=now,
        updated_at=now,
        worker=socket.gethostname(),
    )
    if record.run_id is not None:
        record.write(rq_id=record.run_id)
    record.mark_started(now)


def _run(record: RunRecord, spec: ExtractionSpec, reporter: Reporter,
         save: SaveFn) -> RunOutcome:
    """Load, scan and repair, then compute until done, asked to stop, or the disk is full."""
    if spec.threads:
        torch.set_num_threads(spec.threads)
    extractor = load_extractor(spec)
    expect = Expect(len(extractor.layers), extractor.hidden_size, DTYPES[spec.dtype])
    report = scan(spec.output_dir, expect, spec.verify_window_s, spec.verify_last)
    total, resumed = survey(spec.dataset, report.done)
    _announce(record, report, total, resumed)
    failures = record.failures(spec.max_sample_tries)
    before = record.read()  # read under the lease: earlier runs' bytes are final
    reporter.begin(total, resumed, int(before.get("bytes_written") or 0))
    hooks = _hooks(record, spec, reporter)
    runner = Runner(spec, extractor, report.done, reporter.counters, hooks, failures, save)
    outcome = runner.run()
    record.write(skipped=failures.skipped)
    return outcome


def _hooks(record: RunRecord, spec: ExtractionSpec, reporter: Reporter) -> Hooks:
    return Hooks(
        stop_requested=reporter.stop_requested,
        on_computed=lambda n: record.add(computed=n),
        on_failure=lambda sid, tries, err: _on_failure(record, spec, sid, tries, err),
    )


def repair_message(report: ScanReport, total: int, resumed: int) -> str:
    """Pure: "resumed at 18,420/37,312; 1 partial file removed, 1 corrupt file recomputed"."""
    head = (
        strings.EXTRACT_RESUMED.format(done=f"{resumed:,}", total=f"{total:,}")
        if resumed
        else strings.EXTRACT_STARTED.format(total=f"{total:,}")
    )
    parts = []
    if report.partial_removed:
        n = report.partial_removed
        parts.append(strings.EXTRACT_PARTIAL_REMOVED.format(n=n, s="" if n == 1 else "s"))
    if report.corrupt_removed:
        n = len(report.corrupt_removed)
        parts.append(strings.EXTRACT_CORRUPT_RECOMPUTED.format(n=n, s="" if n == 1 else "s"))
    return head + ("; " + ", ".join(parts) if parts else "")


def _announce(record: RunRecord, report: ScanReport, total: int, resumed: int) -> None:
    message = repair_message(report, total, resumed)
    record.add(partial_removed=report.partial_removed,
               corrupt_recomputed=len(report.corrupt_removed))
    record.write(
        total=total,
        resumed_from=resumed,
        done=resumed,
        message=message,
        updated_at=f"{time.time():.3f}",
    )
    record.event(
        "resumed" if resumed else "started",
        done=resumed,
        total=total,
        message=message,
        partial_removed=report.partial_removed,
        corrupt=",".join(report.corrupt_removed)[:1000],
        scan_s=f"{report.seconds:.3f}",
        files=report.files,
        verified=report.verified,
    )


def _on_failure(
    record: RunRecord, spec: ExtractionSpec, sample_id: str, tries: int, error: str
) -> None:
    kind = "sample_skipped" if tries >= spec.max_sample_tries else "sample_failed"
    record.event(kind, sample=sample_id, tries=tries, error=error[:300])
    if kind == "sample_skipped":
        record.write(
            last_error=strings.EXTRACT_SAMPLE_SKIPPED.format(
                id=sample_id, tries=tries, error=error[:200]
            ),
        )


def _stopped(record: RunRecord, request: str) -> str:
    state = JobState.CANCELLED if request == "cancel" else JobState.PAUSED
    record.write(state=state.value, updated_at=f"{time.time():.3f}")
    record.clear_request()
    record.event(state.value)
    return state.value


def _finish(
    record: RunRecord,
    spec: ExtractionSpec,
    outcome: RunOutcome,
    snap: dict[str, Any],
    on_disk_full: alerts.DiskFullHook,
) -> str:
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    record.write(peak_rss_mb=f"{peak_mb:.1f}")
    if outcome.reason == "completed":
        now = f"{time.time():.3f}"
        record.write(state=JobState.COMPLETED.value, finished_at=now, updated_at=now)
        record.event("completed", **snap, peak_rss_mb=f"{peak_mb:.1f}")
        return JobState.COMPLETED.value
    if outcome.reason == "disk_full":
        return _disk_full(record, spec, outcome.detail, snap, on_disk_full)
    return _stopped(record, outcome.reason)


def _disk_full(record: RunRecord, spec: ExtractionSpec, path: str,
               snap: dict[str, Any], on_disk_full: alerts.DiskFullHook) -> str:
    """Pause on ENOSPC (nothing is lost: the partial file is repaired on resume) and tell
    the bot, whose disk_full playbook can propose a cleanup."""
    message = strings.EXTRACT_DISK_FULL.format(path=path)
    record.write(state=JobState.PAUSED.value, last_error=message,
                 updated_at=f"{time.time():.3f}")
    record.event("disk_full", path=path, message=message)
    try:
        on_disk_full(_disk_full_alert(record.job_id, spec, path, snap))
    except Exception:
        log.warning("disk_full hook for %s failed", record.job_id, exc_info=True)
    return JobState.PAUSED.value


def _disk_full_alert(job_id: str, spec: ExtractionSpec, path: str,
                     snap: dict[str, Any]) -> dict[str, Any]:
    return {"job_id": job_id, "host": spec.host, "path": str(spec.output_dir), "file": path,
            "done": snap["done"], "total": snap["total"],
            "summary": strings.EXTRACT_DISK_FULL_ALERT.format(job=job_id, host=spec.host,
                                                               path=spec.output_dir)}
