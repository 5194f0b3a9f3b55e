"""The early alert card while Redis refuses writes (issue 39, chaos seed 4242): the card
is best effort, queued as the consumer reads the incident's event; Redis out of memory
(and, as after a restart, without the outbox's and the storms' scripts loaded) is a
refusal counted and said as a warning, never "internal error", and the card goes out
once Redis takes writes again."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from bot.config.settings import Settings
from bot.domain.flow import PostMessage
from bot.domain.incident import Alert, Incident
from bot.flow.assembly import Flow, build_flow
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.ssh.pool import ParamikoPool
from storage.stores import open_stores
from tests.helpers.chat import RecordingChat
from tests.helpers.redis_faults import FAULT_ARGS, RedisFaults


@pytest.fixture
def server() -> Iterator[LocalRedis]:
    redis = start_local_redis(args=FAULT_ARGS)
    yield redis
    redis.stop()


@dataclass
class Rig:
    flow: Flow
    chat: RecordingChat
    faults: RedisFaults
    incident: Incident


@pytest.fixture
def rig(server: LocalRedis) -> Iterator[Rig]:
    """A flow on the terminal backend with one open incident, and Redis's faults at hand."""
    settings = Settings.model_validate({"redis_url": server.url, "chat_backend": "terminal",
                                        "slack": {"channel": "C0EARLY"}})
    pool, chat = ParamikoPool(settings.ssh_defaults), RecordingChat()
    faults = RedisFaults(server)
    try:
        flow = build_flow(settings, open_stores(server.url), pool, chat)
        incident, created = flow.incidents.open_or_fold(Alert(source="test", host="gpu-01",
                                                              kind="vram_idle"))
        assert created
        yield Rig(flow, chat, faults, incident)
    finally:
        faults.close()
        pool.close()


def test_an_early_card_redis_refuses_is_a_warning_and_goes_out_later(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    flow, faults, incident = rig.flow, rig.faults, rig.incident
    consumer = flow.consumer()
    faults.admin.script_flush()  # as a restarted Redis: EVALSHA meets NOSCRIPT first
    faults.out_of_memory()
    with caplog.at_level(logging.WARNING):
        consumer._announce({"type": "incident.opened", "incident_id": incident.id},
                           card=True)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert any("Redis refused (oom)" in r.getMessage() for r in caplog.records)
    assert flow.outbox.store.pending(incident.id) == 0, "nothing half-written"
    faults.admin.config_set("maxmemory", "0")
    consumer._announce({"type": "incident.opened", "incident_id": incident.id}, card=True)
    assert flow.outbox.flush(10.0)
    assert [text for _, message, thread, _ in rig.chat.posts if thread is None
            and (text := message.text).startswith("gpu-01")], "the alert card went out"


def test_an_alert_card_whose_incident_redis_lost_is_a_warning_not_an_internal_error(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    """Found in CI (``test_redis_wiped_mid_diagnosis_is_not_an_error_of_ours``): Redis was
    wiped just as the alert card rendered, and the card's failure was logged as "internal
    error … in the alert card". The incident is gone with the data; the data-loss watch
    says so in chat and re-opens it, so the card paths say nothing worse than a warning."""
    flow, incident = rig.flow, rig.incident
    rig.faults.admin.flushall()  # a wiped volume, a failover to an empty replica
    with caplog.at_level(logging.WARNING):
        flow.consumer()._announce({"type": "incident.opened", "incident_id": incident.id},
                                  card=True)
        flow.flow_runner._post(incident, PostMessage(required=False))
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    gone = [r.getMessage() for r in caplog.records if "gone from Redis" in r.getMessage()]
    assert gone == [f"the alert card of {incident.id}: the incident is gone from Redis"]
    assert rig.chat.posts == [], "no card for an incident that no longer exists"
