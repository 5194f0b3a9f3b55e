"""Choose the chat backend by name from settings (errbot style): ``slack`` or ``terminal``."""

from __future__ import annotations

from rich.console import Console

from bot.chat.base import ChatBackend
from bot.chat.interactions import AuditFn
from bot.config.settings import Settings
from bot.core.errors import ConfigError
from storage.connection import Redis

BACKENDS = ("slack", "terminal")


def make_backend(
    settings: Settings,
    *,
    redis: Redis | None = None,
    audit: AuditFn | None = None,
    console: Console | None = None,
) -> ChatBackend:
    """The configured backend; Slack needs SLACK_BOT_TOKEN (checked here, at start)."""
    name = settings.chat_backend
    if name == "terminal":
        from bot.chat.terminal import TerminalBackend

        return TerminalBackend(console)
    if name == "slack":
        if settings.slack_bot_token is None:
            raise ConfigError("chat_backend is slack but SLACK_BOT_TOKEN is not set")
        from bot.chat.slack import SlackBackend, make_client

        return SlackBackend(make_client(settings), audit=audit, redis=redis)
    raise ConfigError(
        f"key 'chat_backend': unknown backend {name!r} (choose from {', '.join(BACKENDS)})"
    )
