"""Slack as a chat backend plugin (``chat_backend: slack``): the Web API backend with its
budget and render ledger shared in Redis, the usergroup lookup shared across replicas,
and the Bolt app (``/slack/events`` over HTTP, or Socket Mode). Everything Slack-only
that the service used to import sits behind this class."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from bot.chat.base import ChatBackend
from bot.chat.slack import SlackBackend, make_client, shared_backend
from bot.config.settings import Settings, secret
from bot.core import strings as S
from bot.core.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from bot.chat.backends import ChatApp
    from bot.chat.home_tab import FleetSource
    from bot.chat.interactions import ApprovalDesk, AuditFn, GroupResolver
    from bot.chat.slash import SlashHandlers
    from storage.stores import Stores


class SlackPlugin:
    name: ClassVar[str] = "slack"

    def __init__(self, settings: Settings, *, stores: Stores | None = None,
                 audit: AuditFn | None = None, console: Console | None = None) -> None:
        self.settings, self.stores, self.audit = settings, stores, audit

    def backend(self) -> ChatBackend:
        if self.settings.slack_bot_token is None:
            raise ConfigError("chat_backend is slack but SLACK_BOT_TOKEN is not set")
        client = make_client(self.settings)
        if self.stores is None:
            return SlackBackend(client, audit=self.audit)
        return shared_backend(client, self.stores, audit=self.audit)

    def groups(self, chat: ChatBackend) -> GroupResolver | None:
        """Who is in a usergroup, asked of Slack once and shared through Redis."""
        from bot.chat.shared_groups import SharedSlackGroups

        if not isinstance(chat, SlackBackend) or self.stores is None:
            return None
        return SharedSlackGroups(chat.client, self.stores.usergroups())

    def app(self, chat: ChatBackend, *, desk: ApprovalDesk, slash: SlashHandlers | None,
            home: FleetSource | None) -> ChatApp | None:
        """The Bolt app on ``chat`` (a backend that is not Slack's has none)."""
        from bot.chat.slack_app import create_slack_app

        if not isinstance(chat, SlackBackend) or self.stores is None:
            return None
        return create_slack_app(self.settings, self.stores, slash=slash,
                                backend=chat, desk=desk, home=home)

    @classmethod
    def missing_secrets(cls, settings: Settings) -> list[tuple[str, str]]:
        from bot.chat.slack_app import socket_mode_wanted

        missing = [name for name, value in (("SLACK_BOT_TOKEN", settings.slack_bot_token),
                                            ("SLACK_SIGNING_SECRET", settings.slack_signing_secret))
                   if not secret(value)]
        if socket_mode_wanted(settings) and not secret(settings.slack_app_token):
            missing.append("SLACK_APP_TOKEN")
        return [(name, S.CHECK_WHY[name]) for name in missing]
