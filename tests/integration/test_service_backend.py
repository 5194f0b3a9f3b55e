"""``serve`` honours ``chat_backend``: the terminal backend needs no Slack at all."""

from __future__ import annotations

import pytest
from redis import Redis
from starlette.testclient import TestClient

from bot.chat.slack import SlackBackend
from bot.chat.terminal import TerminalBackend
from bot.config.settings import Settings
from bot.core.errors import ConfigError
from bot.service import build_service


def test_terminal_backend_serves_without_slack(redis: Redis, redis_url: str) -> None:
    service = build_service(Settings.model_validate(
        {"redis_url": redis_url, "chat_backend": "terminal"}), with_scheduler=False)
    try:
        assert isinstance(service.flow.chat, TerminalBackend) and service.chat_app is None
        with TestClient(service.app) as client:
            assert client.post("/slack/events", content=b"{}").status_code == 404
            assert client.get("/healthz").status_code == 200
    finally:
        service.close()


def test_slack_backend_is_chosen_by_name_and_needs_its_token(redis: Redis, redis_url: str) -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        build_service(Settings.model_validate({"redis_url": redis_url, "chat_backend": "slack"}))
    service = build_service(Settings.model_validate({
        "redis_url": redis_url, "chat_backend": "slack", "slack_bot_token": "xoxb-1",
        "slack_signing_secret": "s"}), with_scheduler=False)
    try:
        assert isinstance(service.flow.chat, SlackBackend) and service.chat_app is not None
        assert service.chat_app.backend is service.flow.chat  # one backend, built once
    finally:
        service.close()
