"""Replay tests/fixtures/hostile/ (one hostile request per file, with the answer it must
get) against the bot's HTTP side served by uvicorn: alerts, health, metrics and Slack on
one port, the Slack Web API stand-in behind it, a real Redis. No answer is ever a 5xx."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr
from redis import Redis

from bot.chat.interactions import audit_sink
from bot.chat.slack_app import SlackApp, create_slack_app
from bot.config.settings import Settings
from bot.ingest.http import create_app
from bot.rig.serving import ServedApp
from bot.rig.slack_standin import SlackStandIn
from storage.audit import AuditLog
from storage.stores import Stores
from tests.fixtures.alerts import ALERT_TOKEN
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, SIGNING_SECRET
from tests.helpers.hostile import case_names, load_case, replay
from tests.helpers.slash_handlers import StoreHandlers

HTTP = {"header_timeout_s": 1.0, "body_timeout_s": 1.0, "keep_alive_s": 2, "max_connections": 64}


@dataclass
class Bot:
    served: ServedApp
    slack: SlackApp
    standin: SlackStandIn
    redis: Redis


@pytest.fixture
def bot(slack_standin: SlackStandIn, redis: Redis, redis_url: str) -> Iterator[Bot]:
    settings = Settings.model_validate({
        "redis_url": redis_url, "http": HTTP, "alerts": {"group_wait_s": 30},
        "hosts": {"gpu-01": {"ssh": "root@10.1.230.174:22"}},
        "slack": {"channel": CHANNEL, "approvers": ["UALICE"], "api_url": slack_standin.api_url},
        "slack_signing_secret": SIGNING_SECRET, "slack_bot_token": BOT_TOKEN,
        "incident_bot_alert_token": SecretStr(ALERT_TOKEN)})
    handlers = StoreHandlers(redis_url)
    stores = Stores(redis, redis)
    slack = create_slack_app(settings, stores, slash=handlers, audit=audit_sink(AuditLog(redis)),
                             update_interval_s=0.2)
    served = ServedApp(create_app(settings, stores, extra_routes=slack.routes()),
                       http=settings.http).start()
    yield Bot(served, slack, slack_standin, redis)
    served.stop()
    slack.close()
    handlers.close()


@pytest.mark.parametrize("name", case_names())
def test_hostile_request_gets_its_answer(bot: Bot, name: str) -> None:
    case = load_case(name)
    expect: dict[str, Any] = case["expect"]
    respond = f"{bot.standin.base}/respond/{name}"
    answer = replay(case, bot.served.url, SIGNING_SECRET, respond)
    if "closed_within_s" in expect:
        assert 0 < answer.closed_after_s <= expect["closed_within_s"], answer
        return
    assert answer.status == expect["status"], (answer.status, answer.body[:300])
    if "error" in expect:
        assert expect["error"] in json.loads(answer.body)["error"], answer.body
    if "text" in expect:
        assert expect["text"] in json.loads(answer.body)["text"], answer.body
    bot.slack.drain()
    if "respond" in expect:
        (call,) = bot.standin.wait_for("response_url", 1)
        assert expect["respond"] in str(call.params["text"]), call.params
        assert call.params["response_type"] == expect.get("respond_type", "ephemeral")
    if "audit" in expect:
        assert audited(bot.redis, expect["audit"]), AuditLog(bot.redis).recent()


def audited(redis: Redis, want: dict[str, str]) -> bool:
    log = AuditLog(redis)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        entries = log.timeline(want["incident"]) if want["incident"] else log.recent()
        if any((e.actor, e.action) == (want["actor"], want["action"]) for e in entries):
            return True
        time.sleep(0.05)  # the refusal is written by the listener's worker thread
    return False


def test_corpus_covers_every_edge() -> None:
    cases = [load_case(n) for n in case_names()]
    paths = {c["path"] for c in cases}
    assert {"/slack/events", "/alerts", "/alerts/alertmanager", "/healthz"} <= paths
    assert all(c["why"] and c["expect"] for c in cases)
    assert not [c for c in cases if c["expect"].get("status", 0) >= 500]
