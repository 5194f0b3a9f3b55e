"""The agent's GPU health alerts (NVML via the fake): critical Xid events, fewer GPUs
than expected, a lost GPU and uncorrectable ECC, delivered to a live bot as gpu_xid,
gpu_missing and gpu_ecc incidents; an application's Xid is not alerted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from redis import Redis

from bot.agent.client import Reply
from bot.agent.config import AgentConfig, parse_args
from bot.agent.runner import Agent
from bot.domain.lifecycle import IncidentState
from storage.incidents import IncidentStore
from tests.fixtures.alerts import ALERT_TOKEN, LiveServer
from tests.fixtures.fake_pynvml import FakeGpu


@pytest.fixture
def state(tmp_path: Path) -> Path:
    (tmp_path / "boot_id").write_text("aaaaaaaa-0000-0000-0000-000000000001\n")
    return tmp_path


def config(state: Path, url: str, **kw: Any) -> AgentConfig:
    return AgentConfig(url=url, token=ALERT_TOKEN, host="gpu-01", state_dir=state / "agent",
                       boot_id_path=state / "boot_id", mounts=(str(state),), **kw)


def busy(**kw: Any) -> FakeGpu:
    return FakeGpu(used_mib=70000, util=95, samples=[(1_000_000, 95)], processes=[(7, 70000)],
                   **kw)


def capture() -> tuple[list[dict[str, Any]], Callable[..., Reply]]:
    sent: list[dict[str, Any]] = []

    def send(url: str, token: str, alerts: list[dict[str, Any]], timeout: float) -> Reply:
        sent.extend(alerts)
        return Reply(200, "{}")

    return sent, send


def test_xid_events_count_and_ecc_become_alerts(fake_nvml: ModuleType, state: Path) -> None:
    fake_nvml.reset([busy(xids=[13, 79]), busy(ecc_uncorrected=2), busy(lost=True),
                     *[busy() for _ in range(4)]])
    sent, send = capture()
    agent = Agent(config(state, "http://bot.invalid", expected_gpus=8), nvml=fake_nvml,
                  send=send)
    assert agent.run_once() == 0
    got = sorted((a["kind"], a["labels"]["subject"], a["status"]) for a in sent)
    assert got == [("gpu_ecc", "gpu1", "firing"), ("gpu_missing", "count", "firing"),
                   ("gpu_missing", "lost:2", "firing"), ("gpu_xid", "gpu0:xid79", "firing")]
    xid = next(a for a in sent if a["kind"] == "gpu_xid")
    assert xid["summary"] == "Xid 79 on GPU 0: GPU has fallen off the bus"
    assert xid["severity"] == "critical" and xid["details"] == {"index": 0, "xid": 79}
    sent.clear()
    assert agent.run_once() == 0 and sent == []  # same state: nothing new, Xids drained
    fake_nvml.STATE.gpus[1].ecc_uncorrected = 0
    assert agent.run_once() == 0
    assert [(a["kind"], a["status"]) for a in sent] == [("gpu_ecc", "resolved")]


def test_health_alerts_open_gpu_incidents_at_the_bot(
        fake_nvml: ModuleType, alert_server: Callable[..., LiveServer], state: Path,
        redis: Redis) -> None:
    bot = alert_server()
    fake_nvml.reset([busy(xids=[48]), *[busy() for _ in range(6)]])
    agent = Agent(config(state, bot.url, expected_gpus=8), nvml=fake_nvml)
    assert agent.run_once() == 0
    kinds = sorted(i.kind for i in IncidentStore(redis).list())
    assert kinds == ["gpu_missing", "gpu_xid"]
    fake_nvml.STATE.gpus.append(busy())
    assert agent.run_once() == 0
    missing = next(i for i in IncidentStore(redis).list() if i.kind == "gpu_missing")
    # a hardware fault outlives its alert (issue 35): the alert cleared is recorded, and the
    # incident stays open until a probe shows the GPU back or a person resolves it
    kept = IncidentStore(redis).require(missing.id)
    assert kept.state is IncidentState.OPEN and kept.cleared_at is not None


def test_expected_gpus_flag() -> None:
    cfg = parse_args(["--url", "http://bot:8080", "--expected-gpus", "8"],
                     {"INCIDENT_BOT_ALERT_TOKEN": "t"})
    assert cfg.expected_gpus == 8
    assert parse_args(["--url", "http://b:1"], {"INCIDENT_BOT_ALERT_TOKEN": "t"}).expected_gpus \
        is None
