"""Alertmanager and JSON webhook parsing: what maps where, and every 400 names its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.domain.findings import Severity
from bot.domain.incident import AlertStatus
from bot.ingest import alertmanager, webhook
from bot.ingest.mapping import Mapper, ssh_address, strip_port
from bot.ingest.schema import PayloadError
from tests.fixtures.alerts import am_alert, am_payload

MAPPER = Mapper(
    {"CustomGpuThing": "vram_idle"},
    {"gpu-01": "root@10.1.230.174:22", "gpu-02": "ops@[fd00::2]:2222"},
)


def b(data: Any) -> bytes:
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    ("raw", "host"),
    [
        ("10.0.0.1:9100", "10.0.0.1"),
        ("gpu-01:9100", "gpu-01"),
        ("[fd00::2]:9100", "fd00::2"),
        ("fd00::2", "fd00::2"),
        ("http://gpu-03:9100/metrics", "gpu-03"),
        ("gpu-04", "gpu-04"),
    ],
)
def test_strip_port(raw: str, host: str) -> None:
    assert strip_port(raw) == host


def test_ssh_address() -> None:
    assert ssh_address("root@10.1.230.174:22") == "10.1.230.174"
    assert ssh_address("ops@[fd00::2]:2222") == "fd00::2"
    assert ssh_address("gpu-09") == "gpu-09"


@pytest.mark.parametrize(
    ("labels", "host"),
    [
        ({"host": "gpu-01"}, "gpu-01"),
        ({"instance": "10.1.230.174:9100"}, "gpu-01"),  # by inventory SSH address
        ({"instance": "[fd00::2]:9400"}, "gpu-02"),
        ({"nodename": "gpu-01.dc1.example.com"}, "gpu-01"),  # FQDN short name
        ({"host": "gpu-77", "instance": "10.1.230.174:9100"}, "gpu-77"),  # host label wins
        ({"instance": "10.9.9.9:9100"}, "10.9.9.9"),
        ({"job": "node"}, None),
    ],
)
def test_host_from_labels(labels: dict[str, str], host: str | None) -> None:
    assert MAPPER.host_from_labels(labels) == host


@pytest.mark.parametrize(
    ("alertname", "labels", "kind"),
    [
        ("NodeFilesystemAlmostOutOfSpace", {}, "disk_full"),
        ("NodeFilesystemSpaceFillingUp", {}, "disk_full"),
        ("NodeFilesystemFilesFillingUp", {}, "disk_full"),
        ("GpuHostRebooted", {}, "vm_restart"),
        ("GpuMemoryHeldIdle", {}, "vram_idle"),
        ("CustomGpuThing", {}, "vram_idle"),  # from config
        ("SomethingElse", {}, "triage"),
        ("SomethingElse", {"incident_kind": "disk_full"}, "disk_full"),
        ("GpuHostRebooted", {"incident_kind": "nonsense"}, "triage"),
    ],
)
def test_kind_mapping(alertname: str, labels: dict[str, str], kind: str) -> None:
    assert MAPPER.kind(alertname, labels) == kind


def test_bad_kind_in_config_is_refused() -> None:
    with pytest.raises(ValueError, match="Bad Kind"):
        Mapper({"X": "Bad Kind"})


def test_alertmanager_payload_maps_everything() -> None:
    body = am_payload(
        am_alert(
            "ignored",
            "NodeFilesystemAlmostOutOfSpace",
            fp="abc",
            severity="critical",
            instance="10.1.230.174:9100",
        ),
        am_alert("gpu-05", status="resolved", fp="def"),
    )
    body["alerts"][0]["labels"].pop("host")
    first, second = alertmanager.parse(b(body), MAPPER)
    assert (first.host, first.kind, first.severity) == ("gpu-01", "disk_full", Severity.CRITICAL)
    assert first.fingerprint == "am:abc" and first.status is AlertStatus.FIRING
    assert first.summary == "NodeFilesystemAlmostOutOfSpace on ignored"
    assert first.details["generator_url"] == "http://prometheus/graph"
    assert (second.host, second.kind) == ("gpu-05", "vram_idle")
    assert second.status is AlertStatus.RESOLVED
    assert first.dedup_key != second.dedup_key


def test_alertmanager_identity_covers_status_and_start() -> None:
    def key(**kw: str) -> str | None:
        return alertmanager.parse(b(am_payload(am_alert("h", fp="f", **kw))), MAPPER)[0].dedup_key

    assert key() == key()
    assert key() != key(status="resolved")
    assert key() != key(starts="2024-05-02T00:00:00Z")


def test_alert_without_host_becomes_triage_on_unknown() -> None:
    raw = am_alert("x")
    raw["labels"] = {"alertname": "GpuMemoryHeldIdle", "job": "dcgm"}
    (alert,) = alertmanager.parse(b(am_payload(raw)), MAPPER)
    assert (alert.host, alert.kind) == ("unknown", "triage")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty body"),
        (b"{nope", "malformed JSON at line 1 column 2"),
        (b"\xff\xfe", "malformed JSON"),
        (b"[]", "body: expected an object, got an array"),
        (b'{"version": "3", "alerts": []}', "unsupported Alertmanager payload version '3'"),
        (b'{"version": "4"}', "alerts: expected an array"),
        (b'{"version": "4", "alerts": [1]}', "alerts[0]: expected an object, got a number"),
        (b'{"version": "4", "alerts": [{"status": "firing"}]}', "alerts[0].labels: an alert needs"),
        (
            b'{"version": "4", "alerts": [{"status": "boom", "labels": {"a": "b"}}]}',
            "alerts[0].status: must be 'firing' or 'resolved', got \"boom\"",
        ),
        (
            b'{"version": "4", "alerts": [{"labels": {"a": 1}}]}',
            "alerts[0].labels.a: expected a string",
        ),
    ],
)
def test_alertmanager_errors_name_the_field(body: bytes, message: str) -> None:
    with pytest.raises(PayloadError) as err:
        alertmanager.parse(body, MAPPER)
    assert message in str(err.value)


def test_webhook_single_and_batch() -> None:
    one = webhook.parse(
        b(
            {
                "host": "10.1.230.174",
                "kind": "disk_full",
                "summary": "full",
                "labels": {"mount": "/data"},
                "details": {"pct": 99},
                "severity": "critical",
                "id": "evt-1",
            }
        ),
        MAPPER,
    )
    assert len(one) == 1 and one[0].host == "gpu-01" and one[0].identity == "wh\0evt-1"
    assert one[0].details == {"pct": 99} and one[0].severity is Severity.CRITICAL
    many = webhook.parse(
        b(
            [
                {"host": "a", "kind": "vm_restart", "source": "agent"},
                {"host": "a", "kind": "vram_idle", "status": "resolved"},
            ]
        ),
        MAPPER,
    )
    assert [(a.source, a.status) for a in many] == [
        ("agent", AlertStatus.FIRING),
        ("webhook", AlertStatus.RESOLVED),
    ]
    assert many[0].summary == "vm_restart on a" and many[0].identity is None


def test_webhook_unknown_kind_opens_triage() -> None:
    (alert,) = webhook.parse(b({"host": "gpu-01", "kind": "gpu fell; rm -rf /"}), MAPPER)
    assert alert.kind == "triage" and alert.labels["requested_kind"] == "gpu_fell__rm_-rf__"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"kind": "disk_full"}, "body.host: expected a string, got null"),
        ({"host": "", "kind": "disk_full"}, "body.host: must not be empty"),
        ({"host": "bad host;", "kind": "disk_full"}, "body.host: invalid host name"),
        ({"host": "h"}, "body.kind: expected a string"),
        ({"host": "h", "kind": "disk_full", "sevrity": "x"}, "body: unknown field 'sevrity'"),
        ({"host": "h", "kind": "disk_full", "labels": []}, "body.labels: expected an object"),
        ({"host": "h", "kind": "disk_full", "details": "x"}, "body.details: expected an object"),
        ({"host": "h", "kind": "disk_full", "status": "ok"}, "body.status: must be 'firing'"),
        (
            [{"host": "h", "kind": "disk_full"}, {"host": 5, "kind": "x"}],
            "[1].host: expected a string",
        ),
        ([], "an empty array holds no alerts"),
        ("text", "body: expected an object, got a string"),
    ],
)
def test_webhook_errors_name_the_field(body: Any, message: str) -> None:
    with pytest.raises(PayloadError) as err:
        webhook.parse(b(body), MAPPER)
    assert message in str(err.value)
