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
from rich.text import Text

from bot.chat.interactions import ApprovalDesk
from bot.chat.terminal import TerminalBackend, TerminalInputError, handle_line
from bot.core import fmt, strings
from bot.core.errors import UserError
from bot.demo.stage import DEMO_APPROVER, DEMO_HOST, Stage, boot_time, start_worker
from bot.domain.lifecycle import IncidentState
from bot.extract.spec import load_spec
from bot.flow import progress_step
from bot.flow.assembly import Flow, build_flow
from bot.flow.consumer import GROUP, Consumer
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


def alert_payload(now: datetime, booted_at: float) -> dict[str, object]:
    """What Alertmanager posts for our GpuHostRebooted rule (webhook payload version 4);
    the summary says when the host booted, read from the host itself."""
    labels = {"alertname": "GpuHostRebooted", "instance": f"{DEMO_HOST}:9100",
              "severity": "critical"}
    summary = strings.DEMO_ALERT_SUMMARY.format(host=DEMO_HOST,
                                                ago=fmt.age(now.timestamp(), booted_at))
    alert = {"status": "firing", "labels": labels,
             "annotations": {"summary": summary},
             "startsAt": now.isoformat().replace("+00:00", "Z"),
             "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "",
             "fingerprint": "5e3d1c0ffee0a1b2"}
    return {"version": "4", "groupKey": "{}:{alertname=\"GpuHostRebooted\"}", "status": "firing",
            "receiver": "incident-bot", "groupLabels": {"alertname": "GpuHostRebooted"},
            "commonLabels": labels, "commonAnnotations": {}, "externalURL": "",
            "truncatedAlerts": 0, "alerts": [alert]}


def send_alert(url: str, token: str, booted_at: float | None = None) -> str:
    """POST the alert as Alertmanager would; return the incident it opened. ``booted_at``:
    when the host booted (the demo reads it from the simulated host); default now."""
    now = datetime.now(UTC)
    payload = alert_payload(now, now.timestamp() if booted_at is None else booted_at)
    reply = httpx.post(f"{url}/alerts/alertmanager", content=json.dumps(payload),
                       headers={"Authorization": f"Bearer {token}",
                                "Content-Type": "application/json"}, timeout=10)
    reply.raise_for_status()
    return str(reply.json()["incidents"][0])


def make_desk(flow: Flow) -> ApprovalDesk:
    return ApprovalDesk(flow.approvals, flow.policy, flow.events,
                        audit=lambda i, actor, action, d: flow.audit.append(i, actor, action, d))


def approve(flow: Flow, backend: TerminalBackend, desk: ApprovalDesk, consumer: Consumer,
            incident_id: str, yes: bool, ask: Callable[[str], str]) -> float:
    """--yes: an intruder's click is refused, then the on-call approves; else read lines.
    Each line's click event (the desk queues it) is handled by ``consumer`` before the next
    prompt, as the service's consumer loop would. Returns the seconds spent waiting for a
    person to type (not the story's time)."""
    if yes:
        for user, line in ((INTRUDER, "approve 1"), (DEMO_APPROVER, "approve 1")):
            backend.console.print(Text(strings.DEMO_TYPES.format(user=user, line=line),
                                       style="dim"))
            handle_line(backend, desk, user, line)
            consumer.drain()
        return 0.0
    waited = 0.0
    while flow.incidents.require(incident_id).state is IncidentState.AWAITING_APPROVAL:
        asked = time.monotonic()
        try:
            line = ask(strings.DEMO_PROMPT.format(user=DEMO_APPROVER))
        except EOFError:
            raise UserError(strings.DEMO_INPUT_ENDED, 130) from None
        finally:
            waited += time.monotonic() - asked
        try:
            handle_line(backend, desk, DEMO_APPROVER, line)
        except TerminalInputError as exc:
            backend.console.print(Text(str(exc)))
        consumer.drain()
    return waited


def follow_progress(flow: Flow, incident_id: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = flow.progress.poll_incident(incident_id)
        if status is None or status.state in progress_step.DONE:
            return
        time.sleep(flow.progress.interval_s)
    raise TimeoutError(f"extraction did not finish within {timeout_s:.0f}s")


def run_story(stage: Stage, console: Console, *, yes: bool, ask: Callable[[str], str],
              say: Callable[[str], None]) -> tuple[str, str]:
    """The story; returns (incident id, job id). Timings go to ``stage.timings``; the
    time a person took to decide goes to ``stage.waited_s``, never into a step."""
    backend = TerminalBackend(console)
    pool = ParamikoPool(stage.settings.ssh_defaults)
    stores = open_stores(stage.redis_url)
    t0 = time.monotonic()
    flow = build_flow(stage.settings, stores, pool, backend, progress_interval_s=1.0)
    try:
        job_id = crashed_job(stage.redis_url, stage.spec_path)
        recorded = queue.status(stores.jobs(), job_id)  # its last report, from its record
        done, total = recorded.done, recorded.total
        stage.done_before = done
        say(strings.DEMO_STEP_EXTRACT.format(written=done, total=total))
        stage.worker = start_worker(stage.redis_url, stage.workdir)
        say(strings.DEMO_STEP_WORKER.format(host=DEMO_HOST, pid=stage.worker.pid))
        stage.http = ServedApp(create_app(stage.settings, stores)).start()
        say(strings.DEMO_STEP_HTTP.format(url=stage.http.url))
        stage.timings.append((strings.DEMO_STEP_SETUP, stage.setup_s + time.monotonic() - t0))
        booted = boot_time(stage.sim)
        console.rule(Text(strings.DEMO_CRASH.format(
            host=DEMO_HOST, ago=fmt.age(time.time(), booted), job=job_id, done=done,
            total=total, pct=fmt.percent(done / total if total else 0.0))))
        with timed(stage, strings.DEMO_STEP_ALERT):
            token = stage.settings.incident_bot_alert_token
            incident_id = send_alert(stage.http.url, token.get_secret_value() if token else "",
                                     booted)
        with timed(stage, strings.DEMO_STEP_DIAGNOSIS):
            flow.events.ensure_group(GROUP)
            consumer = flow.consumer()
            while flow.incidents.require(incident_id).state is not IncidentState.AWAITING_APPROVAL:
                consumer.run_once(block_ms=500)
        t1 = time.monotonic()
        stage.waited_s = approve(flow, backend, make_desk(flow), consumer, incident_id, yes,
                                 ask)
        stage.timings.append((strings.DEMO_STEP_APPROVAL,
                              time.monotonic() - t1 - stage.waited_s))
        with timed(stage, strings.DEMO_STEP_RESUME):
            follow_progress(flow, incident_id)
        return incident_id, job_id
    finally:
        pool.close()
