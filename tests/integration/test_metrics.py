"""``/metrics`` over real HTTP: every family the issue names, valid for ``promtool``.

The app is the real service (``bot.ingest.http.create_app``) on uvicorn and a real Redis; an
alert goes in through ``/alerts`` and comes out as counters and the incidents gauge.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from bot.config.settings import Settings
from bot.core import metrics
from bot.domain.lifecycle import IncidentState
from bot.ingest.http import create_app
from bot.rig.serving import ServedApp
from storage.stores import Stores
from tests.fixtures.need import need

TOKEN = "t0k3n-metrics"
REQUIRED = {
    "incident_bot_alerts_received": "counter",
    "incident_bot_alerts_deduplicated": "counter",
    "incident_bot_incidents": "gauge",
    "incident_bot_ingest_write_duration_seconds": "histogram",
    "incident_bot_diagnosis_duration_seconds": "histogram",
    "incident_bot_ssh_errors": "counter",
    "incident_bot_actions": "counter",
    "incident_bot_slack_api_errors": "counter",
    "incident_bot_slack_api_retries": "counter",
    "incident_bot_queue_depth": "gauge",
    "incident_bot_job_progress_ratio": "gauge",
}


@pytest.fixture
def served(stores: Stores) -> Iterator[ServedApp]:
    settings = Settings(incident_bot_alert_token=SecretStr(TOKEN))
    app = ServedApp(create_app(settings, stores)).start()
    yield app
    app.stop()


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(text: str, name: str, **labels: str) -> float | None:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def scrape(app: ServedApp) -> str:
    resp = httpx.get(f"{app.url}/metrics", timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    return resp.text


def test_metrics_endpoint_has_every_family_and_passes_promtool(served: ServedApp) -> None:
    text = scrape(served)
    fams = families(text)
    for name, kind in REQUIRED.items():
        assert name in fams, name
        assert fams[name].type == kind, (name, fams[name].type)  # type: ignore[attr-defined]
    promtool = shutil.which("promtool")
    need(promtool is not None, "promtool is part of the test rig (scripts/setup.sh)")
    assert promtool is not None
    proc = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_alert_shows_up_as_counters_and_incident_gauge(served: ServedApp) -> None:
    first = scrape(served)
    before = value(first, "incident_bot_alerts_received_total", source="webhook") or 0.0
    writes = value(first, "incident_bot_ingest_write_duration_seconds_count") or 0.0
    body = {"host": "gpu-01", "kind": "vram_idle", "severity": "critical", "id": "evt-1"}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    for _ in range(2):  # the same delivery twice: once received, once deduplicated
        assert httpx.post(f"{served.url}/alerts", json=body, headers=headers, timeout=10).is_success
    text = scrape(served)
    assert value(text, "incident_bot_alerts_received_total", source="webhook") == before + 1
    assert (value(text, "incident_bot_alerts_deduplicated_total", source="webhook") or 0) >= 1
    assert value(text, "incident_bot_incidents", state="open") == 1.0
    # the first delivery was written; its copy was known from that write and needed none
    assert value(text, "incident_bot_ingest_write_duration_seconds_count") == writes + 1
    for state in IncidentState:  # every state is exported, absent ones as 0, never stale
        assert value(text, "incident_bot_incidents", state=state.value) is not None


def test_helpers_and_scrape_hooks(served: ServedApp) -> None:
    metrics.set_job_progress("job-1", "gpu-01", 18_283, 37_312, rate=1.09)
    metrics.QUEUE_DEPTH.labels(queue="ib-extract-gpu-01").set(0)
    calls: list[int] = []
    metrics.add_scrape_hook(lambda: calls.append(1))

    def broken() -> None:
        raise RuntimeError("redis down")

    metrics.add_scrape_hook(broken)  # a broken hook must not break the scrape
    try:
        text = scrape(served)
    finally:
        metrics.clear_scrape_hooks()
    assert calls == [1]
    ratio = value(text, "incident_bot_job_progress_ratio", job="job-1", host="gpu-01")
    assert ratio == pytest.approx(18_283 / 37_312)
    metrics.forget_job("job-1", "gpu-01")
    metrics.forget_job("job-1", "gpu-01")  # twice is fine
    assert value(scrape(served), "incident_bot_job_progress_ratio", job="job-1") is None
