"""The progress message in the incident thread: one message edited in place, a moving
average rate with an absolute ETA, no edit when nothing shown changed, and a closing line
with the true duration. Real Redis and the terminal backend; the job's reported status is
scripted so the rate can change on cue."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest
from redis import Redis
from rich.console import Console

from bot.chat.terminal import TerminalBackend
from bot.config.settings import Settings
from bot.domain.incident import Alert
from bot.domain.incident_record import ChatRefs
from bot.domain.lifecycle import IncidentState
from bot.flow.assembly import Flow, build_flow
from bot.flow.thread import note
from bot.jobs.states import JobState, JobStatus
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores

T0 = 1_764_590_400.0  # 2025-12-01 12:00:00 UTC
BASE = JobStatus(job_id="j-7f3a", state=JobState.RUNNING, done=100, total=400, rate=9.9,
                 eta_s=None, resumed_from=100, repaired={"partial_removed": 2,
                                                         "corrupt_recomputed": 1},
                 last_error=None, host="gpu-01", output_dir="/data/out", name="kimi-hidden",
                 skipped=3)


@dataclass
class Rig:
    ctx: Flow
    chat: TerminalBackend
    incident_id: str
    now: list[float]
    status: list[JobStatus]

    def poll(self, at: float, **change: object) -> None:
        self.now[0] = T0 + at
        self.status[0] = replace(self.status[0], **change)  # type: ignore[arg-type]
        self.ctx.progress.poll_incident(self.incident_id, lambda _j: self.status[0])

    def progress_texts(self) -> list[str]:
        """Every text the progress message showed: its post, then each edit."""
        ts = self.ctx.incidents.require(self.incident_id).parts_to_dict()["progress"]["ts"]
        return [m.text for ref, m in self.chat.history if ref.ts == ts]


@pytest.fixture
def rig(redis: Redis, redis_url: str) -> Iterator[Rig]:
    settings = Settings.model_validate({"redis_url": redis_url, "chat_backend": "terminal"})
    chat = TerminalBackend(Console(file=io.StringIO(), width=120))
    pool = ParamikoPool(settings.ssh_defaults)
    now = [T0]
    ctx = build_flow(settings, open_stores(settings.redis_url), pool, chat, channel="C1",
                     clock=lambda: now[0])
    incident, _ = ctx.incidents.open_or_fold(Alert(source="test", host="gpu-01", kind="vm_restart"))
    parent = chat.post("C1", note("incident"))
    chat_refs = ChatRefs(parent.channel, parent.ts, parent.ts)
    ctx.incidents.update(incident.id, lambda i: replace(i, job_id="j-7f3a", chat=chat_refs))
    for state in ("diagnosing", "awaiting_approval", "approved", "remediating", "verified",
                  "resumed"):
        ctx.incidents.transition(incident.id, IncidentState(state), "test", "setup")
    yield Rig(ctx, chat, incident.id, now, [BASE])
    pool.close()


def test_moving_average_absolute_eta_and_edits_only_on_change(rig: Rig) -> None:
    rig.poll(0)
    rig.poll(5, done=110)
    rig.poll(10, done=120)  # 3 samples over 10 s: 2.00 samples/s
    rig.poll(20, done=130)  # slower now: the average over the window is 30 / 20 s
    rig.poll(20, done=130)  # same instant, same count: nothing new to show
    rig.poll(21, done=131)  # changed, but within 2 s of the last edit: held back
    rig.poll(30, done=140)
    texts = rig.progress_texts()
    assert "25.0% · 100/400 · measuring… · resumed" in texts[0]  # not the job's own 9.9/s
    assert "27.5% · 110/400 · measuring… · resumed" in texts[1]
    assert texts[2].endswith(
        "30.0% · 120/400 · 2.00 samples/s · done ~ 12:02 UTC, in 2 min · resumed at 100")
    assert "32.5% · 130/400 · 1.50 samples/s · done ~ 12:03 UTC, in 3 min" in texts[3]
    assert "35.0% · 140/400 · 1.33 samples/s" in texts[4]
    assert len(texts) == 5, texts  # 7 polls: one post and four edits
    assert all(t.startswith("*kimi-hidden* running: ") for t in texts)
    replies = [ref for ref, _ in rig.chat.history if ref.ts not in ("1",)]
    assert len({r.ts for r in replies}) == 1, "one progress message, edited in place"


def test_paused_job_is_not_edited_and_the_end_gives_the_true_duration(rig: Rig) -> None:
    rig.poll(0)
    rig.poll(10, state=JobState.PAUSED, done=150)
    rig.poll(20)
    rig.poll(40)  # paused: the same text, so no edit however long we wait
    assert len(rig.progress_texts()) == 2
    paused = "*kimi-hidden* paused: ▓▓▓▓░░░░░░ 37.5% · 150/400 · resumed at 100"
    assert rig.progress_texts()[1] == paused  # no rate, no "measuring…" while it stands still
    rig.poll(7_800, state=JobState.COMPLETED, done=400, finished_at=T0 + 7_800)
    texts = rig.progress_texts()
    assert texts[-1].startswith("*kimi-hidden* completed: ▓▓▓▓▓▓▓▓▓▓ 100.0% · 400/400")
    closing = [m.text for _, m in rig.chat.history][-1]
    assert closing == (
        "Extraction finished: kimi-hidden: completed 400/400 in 2 h 10 min · "
        "mean 0.0385 samples/s · 300 written, 3 skipped, 3 repaired "
        "(2 partial files removed, 1 corrupt file recomputed)")
    incident = rig.ctx.incidents.require(rig.incident_id)
    assert incident.state is IncidentState.RESOLVED


def test_a_fresh_job_counts_its_duration_from_its_first_start(rig: Rig) -> None:
    rig.status[0] = replace(BASE, resumed_from=0, done=0, first_started_at=T0 - 41.0)
    rig.poll(0)
    rig.poll(0.4, state=JobState.COMPLETED, done=400, finished_at=T0 + 0.4)
    closing = [m.text for _, m in rig.chat.history][-1]
    assert "completed 400/400 in 41 s · mean 9.66 samples/s · 400 written" in closing
