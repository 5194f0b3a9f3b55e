"""A real Alertmanager (Debian's prometheus-alertmanager) posting to our app over loopback.

Two unclustered instances play an HA pair: both get every alert and both notify, so
the bot sees each notification twice and must apply it once. Also checks the shipped
Prometheus rules and Alertmanager example with promtool and amtool.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml
from redis import Redis

from bot.core.metrics import REGISTRY
from bot.core.procs import free_port, stop_child
from bot.domain.lifecycle import IncidentState
from storage.events import IncidentEvents
from storage.incidents import IncidentStore
from tests.fixtures.alerts import ALERT_TOKEN, LiveServer
from tests.fixtures.need import need

ROOT = Path(__file__).resolve().parents[2]
AM_BIN = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


@pytest.fixture(autouse=True)
def _alertmanager_installed() -> None:
    need(AM_BIN is not None, "prometheus-alertmanager not installed")


class Alertmanager:
    def __init__(self, workdir: Path, webhook_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True)
        config = {
            "route": {
                "receiver": "bot",
                "group_by": ["alertname"],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [
                {
                    "name": "bot",
                    "webhook_configs": [
                        {
                            "url": webhook_url,
                            "send_resolved": True,
                            "http_config": {
                                "authorization": {"type": "Bearer", "credentials": ALERT_TOKEN}
                            },
                        }
                    ],
                }
            ],
        }
        (workdir / "am.yml").write_text(yaml.safe_dump(config))
        self.args = [
            str(AM_BIN),
            f"--config.file={workdir / 'am.yml'}",
            f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]
        self.log = (workdir / "am.log").open("wb")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Alertmanager:
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "alertmanager exited at start"
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("alertmanager did not become ready")

    def post(self, alerts: list[dict[str, object]]) -> None:
        response = httpx.post(f"{self.url}/api/v2/alerts", json=alerts, timeout=5)
        assert response.status_code == 200, response.text

    def stop(self) -> None:
        if self.proc is not None:
            stop_child(self.proc)
        self.log.close()


@pytest.fixture
def ha_pair(tmp_path: Path,
            alert_server: Callable[..., LiveServer]) -> Iterator[list[Alertmanager]]:
    bot = alert_server(alerts={"group_wait_s": 30.0})
    pair = [Alertmanager(tmp_path / f"am{i}", f"{bot.url}/alerts/alertmanager") for i in (1, 2)]
    try:
        yield [am.start() for am in pair]
    finally:
        for am in pair:
            am.stop()


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def _alert(host: str, starts: datetime, ends: datetime) -> dict[str, object]:
    return {
        "labels": {
            "alertname": "GpuMemoryHeldIdle",
            "host": host,
            "gpu": "0",
            "severity": "critical",
        },
        "annotations": {"summary": f"GPU 0 on {host} held idle"},
        "startsAt": starts.isoformat(),
        "endsAt": ends.isoformat(),
    }


def test_alerts_through_a_real_ha_pair_become_incidents(
    ha_pair: list[Alertmanager], redis: Redis
) -> None:
    store, events = IncidentStore(redis), IncidentEvents(redis)
    dups_before = _deduplicated()
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    alerts = [_alert(h, start, start + timedelta(hours=1)) for h in ("gpu-01", "gpu-02", "gpu-03")]
    for am in ha_pair:
        am.post(alerts)
    wait_for(lambda: len(store.list()) == 3 and events.count("incident.grouped") == 2)
    wait_for(lambda: _deduplicated() - dups_before >= 3)  # the twin notification arrived
    incidents = store.list()
    assert sorted(i.host for i in incidents) == ["gpu-01", "gpu-02", "gpu-03"]
    assert all(i.count == 1 for i in incidents)  # twin and repeated notifications applied once
    assert events.count("incident.opened") == 1
    (parent,) = [i for i in incidents if i.parent_id is None]
    assert parent.kind == "vram_idle" and len(parent.hosts) == 3
    assert parent.summary == f"GPU 0 on {parent.host} held idle"

    ended = datetime.now(UTC) - timedelta(seconds=1)
    for am in ha_pair:
        am.post([_alert("gpu-02", start, ended)])
    wait_for(lambda: store.require(_id_of(store, "gpu-02")).state is IncidentState.RESOLVED)
    assert events.count("incident.resolved") == 1
    assert {i.host for i in store.list(open_only=True)} == {"gpu-01", "gpu-03"}


def _deduplicated() -> float:
    value = REGISTRY.get_sample_value(
        "incident_bot_alerts_deduplicated_total", {"source": "alertmanager"}
    )
    return value or 0.0


def _id_of(store: IncidentStore, host: str) -> str:
    return next(i.id for i in store.list() if i.host == host)


def test_prometheus_rules_check_and_unit_tests() -> None:
    promtool = shutil.which("promtool")
    need(promtool is not None, "promtool not installed")
    assert promtool is not None
    rules = sorted(
        str(p)
        for p in (ROOT / "deploy/prometheus").glob("*.yml")
        if not p.name.endswith(".test.yml")
    )
    assert rules, "no rule files shipped"
    checked = subprocess.run(
        [promtool, "check", "rules", *rules], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tests = sorted(str(p) for p in (ROOT / "deploy/prometheus").glob("*.test.yml"))
    tested = subprocess.run(
        [promtool, "test", "rules", *tests], capture_output=True, text=True, timeout=60
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_alertmanager_example_config_is_valid() -> None:
    amtool = shutil.which("amtool")
    need(amtool is not None, "amtool not installed")
    assert amtool is not None
    config = ROOT / "deploy/alertmanager/alertmanager.yml"
    result = subprocess.run(
        [amtool, "check-config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
