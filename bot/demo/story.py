"""The seed story, step by step, through the same code paths as production: a real alert
over HTTP, the flow consumer, the approval desk, remediation over SSH, an RQ worker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
from rich.console import Console

from bot.chat.interactions import ApprovalDesk
from bot.chat.terminal import TerminalBackend, TerminalInputError, handle_line
from bot.core.errors import UserError
from bot.demo.stage import DEMO_APPROVER, DEMO_HOST, Stage, start_worker
from bot.domain.lifecycle import IncidentState
from bot.extract.spec import load_spec
from bot.flow import progress_step
from bot.flow.assembly import Flow, build_flow
from bot.flow.consumer import GROUP
from bot.ingest.http import create_app
from bot.jobs import queue
from bot.jobs.states import JobState
from bot.rig.serving import ServedApp
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores

INTRUDER = "U0INTERN01"


@contextmanager
def timed(stage: Stage, label: str) -> Iterator[None]:
    t0 = time.monotonic()
    yield
    stage.timings.append((label, time.monotonic() - t0))


def crashed_job(redis_url: str, spec_path: Path, host: str = DEMO_HOST) -> str:
    """Record the extraction that was running on ``host`` when the VM died."""
    spec = load_spec(spec_path)
    store = open_stores(redis_url).jobs()
    job_id = queue.submit(store, spec, host=host)
    queue.pause(store, job_id)  # take the run off the queue: nothing runs it now
    done = sum(1 for _ in spec.output_dir.glob("*.pt"))  # its last progress report
    store.write(job_id, state=JobState.INTERRUPTED.value, done=done)
    store.event(job_id, "interrupted", reason="host restarted")
    return job_id


def alert_payload(now: datetime) -> dict[str, object]:
    """What Alertmanager posts for our GpuHostRebooted rule (webhook payload version 4)."""
    labels = {"alertname": "GpuHostRebooted", "instance": f"{DEMO_HOST}:9100",
              "severity": "critical"}
    alert = {"status": "firing", "labels": labels,
             "annotations": {"summary": f"{DEMO_HOST} booted 2 minutes ago"},
             "startsAt": now.isoformat().replace("+00:00", "Z"),
             "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "",
             "fingerprint": "5e3d1c0ffee0a1b2"}
    return {"version": "4", "groupKey": "{}:{alertname=\"GpuHostRebooted\"}", "status": "firing",
            "receiver": "incident-bot", "groupLabels": {"alertname": "GpuHostRebooted"},
            "commonLabels": labels, "commonAnnotations": {}, "externalURL": "",
            "truncatedAlerts": 0, "alerts": [alert]}


def send_alert(url: str, token: str) -> str:
    """POST the alert as Alertmanager would; return the incident it opened."""
    secret = token
    reply = httpx.post(f"{url}/alerts/alertmanager", content=json.dumps(alert_payload(
        datetime.now(UTC))), headers={"Authorization": f"Bearer {secret}",
                                      "Content-Type": "application/json"}, timeout=10)
    reply.raise_for_status()
    return str(reply.json()["incidents"][0])


def make_desk(flow: Flow) -> ApprovalDesk:
    return ApprovalDesk(flow.approvals, flow.policy, flow.callbacks(),
                        audit=lambda i, actor, action, d: flow.audit.append(i, actor, action, d))


def approve(flow: Flow, backend: TerminalBackend, desk: ApprovalDesk, incident_id: str,
            yes: bool, ask: Callable[[str], str]) -> None:
    """--yes: an intruder's click is refused, then the on-call approves; else read lines."""
    if yes:
        for user, line in ((INTRUDER, "approve 1"), (DEMO_APPROVER, "approve 1")):
            backend.console.print(f"[dim]{user} types:[/dim] {line}")
            handle_line(backend, desk, user, line)
        return
    while flow.incidents.require(incident_id).state is IncidentState.AWAITING_APPROVAL:
        try:
            line = ask(f"you are {DEMO_APPROVER}; type e.g. 'approve 1' or 'deny 1 \"why\"' > ")
        except EOFError:
            raise UserError("input ended before a decision: nothing was run on the host",
                            130) from None
        try:
            handle_line(backend, desk, DEMO_APPROVER, line)
        except TerminalInputError as exc:
            backend.console.print(str(exc))


def follow_progress(flow: Flow, incident_id: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = flow.progress.poll_incident(incident_id)
        if status is None or status.state in progress_step.DONE:
            return
        time.sleep(flow.progress.interval_s)
    raise TimeoutError(f"extraction did not finish within {timeout_s:.0f}s")


def run_story(stage: Stage, console: Console, *, yes: bool,
              ask: Callable[[str], str]) -> str:
    backend = TerminalBackend(console)
    pool = ParamikoPool(stage.settings.ssh_defaults)
    stores = open_stores(stage.redis_url)
    flow = build_flow(stage.settings, stores, pool, backend, progress_interval_s=1.0)
    try:
        stage.worker = start_worker(stage.redis_url, stage.workdir)
        job_id = crashed_job(stage.redis_url, stage.spec_path)
        console.rule(f"VM {DEMO_HOST} restarted; extraction {job_id} was 49% done")
        stage.http = ServedApp(create_app(stage.settings, stores)).start()
        with timed(stage, "alert received (Alertmanager webhook → incident)"):
            token = stage.settings.incident_bot_alert_token
            incident_id = send_alert(stage.http.url, token.get_secret_value() if token else "")
        with timed(stage, "message posted, diagnosis over SSH, findings edited in"):
            flow.events.ensure_group(GROUP)
            consumer = flow.consumer()
            while flow.incidents.require(incident_id).state is not IncidentState.AWAITING_APPROVAL:
                consumer.run_once(block_ms=500)
        with timed(stage, "approval → stop/disable → GPUs verified free → resume queued"):
            approve(flow, backend, make_desk(flow), incident_id, yes, ask)
        with timed(stage, "extraction resumed and finished (RQ worker)"):
            follow_progress(flow, incident_id)
        return incident_id
    finally:
        pool.close()
