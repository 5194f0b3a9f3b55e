"""One host's hung ``nvidia-smi`` never holds another host's message: ``serve`` diagnoses
incidents a few at once, so the healthy host's card is posted while the hung host is still
being diagnosed, and the hung one still settles with its own message."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from bot import service as service_module
from bot.config.settings import Settings
from bot.domain.findings import Severity
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.sim.sshd import SimHost
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    CHANNEL,
    ONCALL,
    SECRET,
    TOKEN,
    Loop,
    loop,
    wait_until,
)

S = IncidentState


def two_hosts(redis_url: str, hung: SimHost, seed: SimHost, api_url: str) -> Settings:
    def host(sim: SimHost) -> dict[str, str]:
        return {"ssh": sim.target, "key": str(sim.key_path),
                "known_hosts": str(sim.known_hosts_path)}

    return Settings.model_validate({
        "redis_url": redis_url, "hosts": {"gpu-01": host(hung), "gpu-02": host(seed)},
        "slack": {"channel": CHANNEL, "approvers": [ONCALL], "api_url": api_url},
        "alerts": {"group_wait_s": 0},
        "extra": {"scheduler": {"enabled": False},
                  "diagnostics": {"command_timeout_s": 6.0}},
        "slack_signing_secret": SECRET, "slack_bot_token": TOKEN})


def test_a_hung_probe_on_one_host_does_not_hold_the_other_hosts_message(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:  # noqa: F811
    hung, seed = sim_factory("gpu_smi_hang"), sim_factory("seed")
    loop.start(two_hosts(redis_url, hung, seed, loop.standin.api_url))
    store = loop.flow.incidents
    sent = time.monotonic()
    stuck, _ = store.open_or_fold(Alert(source="test", host="gpu-01", kind="vram_idle",
                                        severity=Severity.CRITICAL))
    fine, _ = store.open_or_fold(Alert(source="test", host="gpu-02", kind="vram_idle",
                                       severity=Severity.CRITICAL))

    wait_until(lambda: store.require(fine.id).chat is not None, 30, "gpu-02's message")
    healthy_after = time.monotonic() - sent
    assert store.require(stuck.id).state is S.DIAGNOSING  # gpu-01 still waits on nvidia-smi
    assert healthy_after < 6.0, f"gpu-02 waited {healthy_after:.1f} s behind gpu-01"

    wait_until(lambda: store.require(stuck.id).state is not S.DIAGNOSING, 60,
               "gpu-01's diagnosis")  # its message was posted at diagnosing, then edited
    settled = store.require(stuck.id)
    assert settled.state is not S.DIAGNOSING and settled.diagnosis is not None
    assert "nvidia-smi" in " ".join(f.title for f in settled.diagnosis.findings)


def test_an_incident_waiting_for_a_diagnosis_worker_has_its_message_already(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """More alerts than workers: the one queued behind a hung probe is announced (its
    alert card, "diagnosis queued") while it is still open, then edited when diagnosed."""
    monkeypatch.setattr(service_module, "DIAGNOSIS_WORKERS", 1)
    hung, seed = sim_factory("gpu_smi_hang"), sim_factory("seed")
    loop.start(two_hosts(redis_url, hung, seed, loop.standin.api_url))
    store = loop.flow.incidents
    stuck, _ = store.open_or_fold(Alert(source="test", host="gpu-01", kind="vram_idle",
                                        severity=Severity.CRITICAL))
    wait_until(lambda: store.require(stuck.id).state is S.DIAGNOSING, 30, "gpu-01 diagnosing")
    queued, _ = store.open_or_fold(Alert(source="test", host="gpu-02", kind="vram_idle",
                                         severity=Severity.CRITICAL))
    wait_until(lambda: store.require(queued.id).chat is not None, 30, "gpu-02's alert card")
    assert store.require(queued.id).state is S.OPEN  # still waiting for the one worker
    chat = store.require(queued.id).chat
    assert chat is not None
    assert "Diagnosis queued" in json.dumps(loop.standin.messages[(chat.channel, chat.ts)])
    wait_until(lambda: store.require(queued.id).state is S.AWAITING_APPROVAL, 90,
               "gpu-02 diagnosed after gpu-01")
    assert store.require(queued.id).chat == chat  # the same message, edited
    assert len(loop.standin.top_level(CHANNEL)) == 2
