"""Job status records and the pure rule that combines our record with RQ's view of the run.

The record says what the job last reported; RQ says whether a run is queued, started
or gone; the heartbeat age says whether a "started" run is still alive. A run whose
worker died is ``interrupted`` until RQ's cleanup requeues it (then ``queued``) or a
person resumes it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bot.domain.jobs import FINAL, RESUMABLE, UNFINISHED, JobState
from bot.jobs.progress import Progress

__all__ = ["FINAL", "RESUMABLE", "UNFINISHED", "JobState", "JobStatus", "derive_state",
           "status_from_fields"]


WAITING_RQ = frozenset({"queued", "scheduled", "deferred"})


def derive_state(
    recorded: JobState, rq_status: str | None, heartbeat_age_s: float | None, stale_after_s: float
) -> JobState:
    """The state to show, from the recorded state, the RQ run's status and liveness.

    ``rq_status`` is RQ's JobStatus value for the current run (None when the run is
    unknown or expired).
    """
    if recorded in FINAL:
        return recorded
    if rq_status in WAITING_RQ:
        return JobState.PAUSED if recorded is JobState.PAUSED else JobState.QUEUED
    if rq_status == "started":
        alive = heartbeat_age_s is not None and heartbeat_age_s <= stale_after_s
        return JobState.RUNNING if alive else JobState.INTERRUPTED
    if rq_status == "failed":
        return JobState.PAUSED if recorded is JobState.PAUSED else JobState.FAILED
    if recorded in (JobState.RUNNING, JobState.QUEUED):
        # finished/stopped/canceled/expired while we believed it active: it did not end cleanly
        return JobState.INTERRUPTED
    return recorded


@dataclass(frozen=True)
class JobStatus:
    """What ``extract status``, ``/ir job ID`` and the progress message show."""

    job_id: str
    state: JobState
    done: int
    total: int
    rate: float | None
    eta_s: float | None
    resumed_from: int
    repaired: dict[str, int]
    last_error: str | None
    host: str
    output_dir: str
    name: str = ""
    skipped: int = 0
    bytes_written: int = 0
    computed: int = 0
    runs: int = 0
    rq_id: str = ""
    message: str = ""
    incident_id: str | None = None
    created_at: float | None = None
    first_started_at: float | None = None
    finished_at: float | None = None
    updated_at: float | None = None

    @property
    def progress(self) -> Progress:
        return Progress(self.done, self.total, self.rate, self.eta_s)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["state"] = self.state.value
        return out


def _num(fields: dict[str, str], name: str) -> float | None:
    value = fields.get(name, "")
    try:
        return float(value) if value != "" else None
    except ValueError:
        return None


def _int(fields: dict[str, str], name: str) -> int:
    value = _num(fields, name)
    return int(value) if value is not None else 0


def status_from_fields(
    fields: dict[str, str], rq_status: str | None, now: float, stale_after_s: float
) -> JobStatus:
    """Pure: the record hash plus RQ's run status to a JobStatus."""
    updated = _num(fields, "updated_at")
    age = now - updated if updated is not None else None
    state = derive_state(JobState(fields.get("state", "queued")), rq_status, age, stale_after_s)
    active = state is JobState.RUNNING
    return JobStatus(
        job_id=fields["id"],
        state=state,
        done=_int(fields, "done"),
        total=_int(fields, "total"),
        rate=_num(fields, "rate") if active else None,
        eta_s=_num(fields, "eta_s") if active else None,
        resumed_from=_int(fields, "resumed_from"),
        repaired={
            "partial_removed": _int(fields, "partial_removed"),
            "corrupt_recomputed": _int(fields, "corrupt_recomputed"),
        },
        last_error=fields.get("last_error") or None,
        host=fields.get("host", ""),
        output_dir=fields.get("output_dir", ""),
        name=fields.get("name", ""),
        skipped=_int(fields, "skipped"),
        bytes_written=_int(fields, "bytes_written"),
        computed=_int(fields, "computed"),
        runs=_int(fields, "runs"),
        rq_id=fields.get("rq_id", ""),
        message=fields.get("message", ""),
        incident_id=fields.get("incident_id") or None,
        created_at=_num(fields, "created_at"),
        first_started_at=_num(fields, "first_started_at"),
        finished_at=_num(fields, "finished_at"),
        updated_at=updated,
    )
