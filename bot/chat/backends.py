"""Choose the chat backend by name from settings (errbot style): ``slack`` or ``terminal``."""

from __future__ import annotations

from rich.console import Console

from bot.chat.base import ChatBackend
from bot.chat.interactions import AuditFn
from bot.config.settings import Settings
from bot.core.errors import ConfigError
from storage.stores import Stores

BACKENDS = ("slack", "terminal")


def make_backend(
    settings: Settings,
    *,
    stores: Stores | None = None,
    audit: AuditFn | None = None,
    console: Console | None = None,
) -> ChatBackend:
    """The configured backend; Slack needs SLACK_BOT_TOKEN (checked here, at start).
    With ``stores`` the Slack budget and render ledger are shared in Redis."""
    name = settings.chat_backend
    if name == "terminal":
        from bot.chat.terminal import TerminalBackend

        return TerminalBackend(console)
    if name == "slack":
        if settings.slack_bot_token is None:
            raise ConfigError("chat_backend is slack but SLACK_BOT_TOKEN is not set")
        from bot.chat.slack import SlackBackend, make_client, shared_backend

        client = make_client(settings)
        if stores is None:
            return SlackBackend(client, audit=audit)
        return shared_backend(client, stores, audit=audit)
    raise ConfigError(
        f"key 'chat_backend': unknown backend {name!r} (choose from {', '.join(BACKENDS)})"
    )
