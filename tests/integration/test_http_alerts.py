"""The HTTP service against a real Redis: codes, reasons, dedup, grouping, replicas, outages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from redis import Redis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from bot.domain.lifecycle import IncidentState
from bot.ingest.http import create_app
from bot.rig.localredis import start_local_redis
from storage.connection import connect
from storage.events import IncidentEvents
from storage.incidents import IncidentStore
from storage.silences import SilenceStore
from storage.stores import Stores, open_stores
from tests.fixtures.alerts import AUTH, LiveServer, am_alert, am_payload, make_settings

AM = "/alerts/alertmanager"


def post_am(client: TestClient, *alerts: dict[str, Any]) -> httpx.Response:
    return client.post(AM, json=am_payload(*alerts), headers=AUTH)


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "test-alert-token"}]
)
def test_unauthenticated_is_401(alert_client: TestClient, headers: dict[str, str]) -> None:
    for path in (AM, "/alerts"):
        response = alert_client.post(path, json={"host": "h", "kind": "disk_full"}, headers=headers)
        assert response.status_code == 401
        assert "bearer token" in response.json()["error"]
        assert response.headers["www-authenticate"] == "Bearer"


def test_no_token_configured_refuses_everything(make_alert_app: Callable[..., Starlette]) -> None:
    with TestClient(make_alert_app(incident_bot_alert_token=None)) as c:
        response = c.post("/alerts", json={}, headers={"Authorization": "Bearer "})
    assert response.status_code == 401
    assert "INCIDENT_BOT_ALERT_TOKEN is not set" in response.json()["error"]


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        (AM, b"{not json", "malformed JSON at line 1 column 2"),
        (AM, b'{"version": "4", "alerts": "x"}', "alerts: expected an array of alerts"),
        (AM, b'{"version": "2", "alerts": []}', "unsupported Alertmanager payload version '2'"),
        ("/alerts", b'{"host": "h"}', "body.kind: expected a string, got null"),
        ("/alerts", b'{"host": "h", "kind": "disk_full", "colour": 1}', "unknown field 'colour'"),
    ],
)
def test_malformed_is_400_with_reason(
    alert_client: TestClient, path: str, body: bytes, reason: str
) -> None:
    response = alert_client.post(path, content=body, headers=AUTH)
    assert response.status_code == 400
    assert reason in response.json()["error"]


def test_oversized_is_413_by_header_and_by_stream(make_alert_app: Callable[..., Starlette]) -> None:
    with TestClient(make_alert_app(http={"max_body_bytes": 1000})) as c:
        declared = c.post("/alerts", content=b"x" * 1001, headers=AUTH)
        streamed = c.post("/alerts", content=(b"x" * 400 for _ in range(3)), headers=AUTH)
        fits = c.post("/alerts", json={"host": "h", "kind": "disk_full"}, headers=AUTH)
    assert declared.status_code == 413 and "1000-byte limit" in declared.json()["error"]
    assert streamed.status_code == 413 and "content-length" not in streamed.request.headers
    assert fits.status_code == 200


def test_alertmanager_ha_duplicates_and_resolve(alert_client: TestClient, redis: Redis) -> None:
    alert = am_alert("gpu-01", fp="fp1", severity="critical")
    first, second = post_am(alert_client, alert), post_am(alert_client, alert)
    assert first.status_code == second.status_code == 200
    assert first.json() == {"accepted": 1, "incidents": ["INC-1"], "outcomes": {"created": 1}}
    assert second.json()["outcomes"] == {"duplicate": 1}
    store = IncidentStore(redis)
    assert store.require("INC-1").count == 1
    resolved = {**alert, "status": "resolved", "endsAt": "2024-05-01T11:00:00Z"}
    assert post_am(alert_client, resolved).json()["outcomes"] == {"resolved": 1}
    assert post_am(alert_client, resolved).json()["outcomes"] == {"duplicate": 1}
    assert store.require("INC-1").state is IncidentState.RESOLVED


def test_group_notifications_resend_alerts_without_double_counting(
    alert_client: TestClient, redis: Redis
) -> None:
    """Alertmanager repeats every alert of a group in each notification."""
    alerts = [am_alert(f"gpu-{i:02d}", fp=f"f{i}") for i in range(3)]
    for n in range(1, 4):
        post_am(alert_client, *alerts[:n])
    incidents = IncidentStore(redis).list()
    assert [i.count for i in incidents] == [1, 1, 1]


def test_rack_reboot_is_one_message(alert_client: TestClient, redis: Redis) -> None:
    for batch in range(4):
        alerts = [am_alert(f"rack1-{batch * 50 + i:03d}", "GpuHostRebooted") for i in range(50)]
        assert post_am(alert_client, *alerts).status_code == 200
    events = IncidentEvents(redis)
    assert events.count("incident.opened") == 1 and events.count("incident.grouped") == 199
    (parent,) = [i for i in IncidentStore(redis).list() if i.parent_id is None]
    assert parent.kind == "vm_restart" and len(parent.hosts) == 200


def test_generic_webhook_and_unknown_kind(alert_client: TestClient, redis: Redis) -> None:
    body = [
        {"host": "gpu-01", "kind": "disk_full", "summary": "/data 99%", "id": "e1"},
        {"host": "gpu-01", "kind": "fan_on_fire", "summary": "smoke"},
    ]
    response = alert_client.post("/alerts", json=body, headers=AUTH)
    assert response.status_code == 200 and response.json()["accepted"] == 2
    kinds = {i.kind: i for i in IncidentStore(redis).list()}
    assert set(kinds) == {"disk_full", "triage"}
    assert kinds["triage"].labels["requested_kind"] == "fan_on_fire"
    again = alert_client.post("/alerts", json=body[0], headers=AUTH)
    assert again.json()["outcomes"] == {"duplicate": 1}


def test_silenced_alerts_open_nothing(alert_client: TestClient, redis: Redis) -> None:
    SilenceStore(redis).add("gpu-01", "vram_idle", 300, author="alice", reason="benchmark")
    response = post_am(alert_client, am_alert("gpu-01"), am_alert("gpu-02", fp="other"))
    assert response.json()["outcomes"] == {"silenced": 1, "created": 1}
    assert [i.host for i in IncidentStore(redis).list()] == ["gpu-02"]


def test_two_app_instances_behave_as_one(redis_url: str, redis: Redis) -> None:
    settings = make_settings(redis_url)
    a = TestClient(create_app(settings, open_stores(redis_url)))
    b = TestClient(create_app(settings, open_stores(redis_url)))
    with a, b:
        alerts = [am_alert(f"gpu-{i}", fp=f"f{i}") for i in range(10)]
        ra, rb = post_am(a, *alerts), post_am(b, *alerts)  # the HA pair's twin notifications
        assert ra.json()["outcomes"] == {"created": 1, "grouped": 9}
        assert rb.json()["outcomes"] == {"duplicate": 10}
        resolved = {**alerts[0], "status": "resolved"}
        assert post_am(b, resolved).json()["outcomes"] == {"resolved": 1}
        assert post_am(a, resolved).json()["outcomes"] == {"duplicate": 1}
    assert IncidentStore(redis).require("INC-1").state is IncidentState.RESOLVED


def test_redis_unreachable_is_503(make_settings_dead: Starlette) -> None:
    with TestClient(make_settings_dead) as c:
        response = c.post(AM, json=am_payload(am_alert("gpu-01")), headers=AUTH)
        ready = c.get("/readyz")
        health = c.get("/healthz")
    assert response.status_code == 503 and response.headers["retry-after"] == "5"
    assert "retry later" in response.json()["error"]
    assert ready.status_code == 503 and health.status_code == 200


@pytest.fixture
def make_settings_dead() -> Starlette:
    from bot.core.procs import free_port

    return create_app(make_settings(), open_stores(f"redis://127.0.0.1:{free_port()}/0"))


def test_redis_killed_and_restarted_keeps_what_was_acked(tmp_path: Any) -> None:
    """A private redis-server: 2xx before SIGKILL survives, 503 during, 2xx after."""
    (tmp_path / "redis").mkdir()
    server = start_local_redis(tmp_path / "redis")
    try:
        app = create_app(make_settings(server.url), open_stores(server.url))
        with TestClient(app) as c:
            assert post_am(c, am_alert("gpu-01", fp="a")).status_code == 200
            server.kill()
            down = post_am(c, am_alert("gpu-02", fp="b"))
            assert down.status_code == 503
            server.start()
            assert post_am(c, am_alert("gpu-02", fp="b")).status_code == 200
        hosts = sorted(i.host for i in IncidentStore(connect(server.url)).list())
        assert hosts == ["gpu-01", "gpu-02"]
    finally:
        server.stop()


def test_health_metrics_and_extension_points(redis: Redis) -> None:
    calls: list[str] = []

    async def hello(_: Request) -> PlainTextResponse:
        return PlainTextResponse("slack here")

    async def started() -> None:
        calls.append("start")

    app = create_app(
        make_settings(),
        Stores(redis, redis),
        extra_routes=[Route("/slack/events", hello, methods=["POST"])],
        on_startup=[started],
        on_shutdown=[lambda: calls.append("stop")],
    )
    with TestClient(app) as c:
        assert c.post("/slack/events").text == "slack here"
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json() == {"status": "ok", "redis": "ok"}
        post_am(c, am_alert("gpu-01"))
        metrics = c.get("/metrics").text
    assert calls == ["start", "stop"]
    assert 'incident_bot_incidents{state="open"} 1.0' in metrics
    assert 'incident_bot_alerts_received_total{source="alertmanager"}' in metrics


@pytest.fixture
def live(redis: Redis) -> Iterator[LiveServer]:
    app = create_app(make_settings(http={"max_body_bytes": 2048}), Stores(redis, redis))
    server = LiveServer(app).start()
    yield server
    server.stop()


def test_over_the_network_with_uvicorn(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=10) as http:
        ok = http.post(AM, json=am_payload(am_alert("gpu-01")))
        chunked = http.post("/alerts", content=(b"x" * 1024 for _ in range(4)))
    assert ok.status_code == 200 and ok.json()["incidents"] == ["INC-1"]
    assert chunked.status_code == 413
