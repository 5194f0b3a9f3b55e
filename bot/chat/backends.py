"""The chat backend chosen by name (errbot's backend plugin manager): ``chat_backend:
slack`` names an entry of the ``incident_bot.chat_backends`` entry points, built-in and
third-party alike (``slack``, ``terminal``: declared in ``pyproject.toml``).

Each entry is a ``ChatPlugin`` class, made from the settings (it unpacks what it needs,
as errbot's backends take the whole config), which builds the ``ChatBackend`` the flow
posts through and what its platform adds around it: the usergroup lookup for approvals,
and its interactive side (Slack's ``/slack/events`` routes or Socket Mode). The service
assembles any backend the same way; the Slack-only modules sit behind ``slack_plugin``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from bot.chat.base import ChatBackend
from bot.config.settings import Settings
from bot.core import plugins
from bot.core import strings as S
from bot.core.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from bot.chat.home_tab import FleetSource
    from bot.chat.interactions import ApprovalDesk, AuditFn, GroupResolver
    from bot.chat.slash import SlashHandlers
    from storage.stores import Stores

GROUP = "incident_bot.chat_backends"
# pyproject.toml declares the same entries (a test keeps the two equal)
BUILTIN: dict[str, str] = {"slack": "bot.chat.slack_plugin:SlackPlugin",
                           "terminal": "bot.chat.terminal:TerminalPlugin"}


class ChatApp(Protocol):
    """A platform's interactive side: routes the HTTP service mounts (none over a socket),
    started with the bot's background work and closed with it."""

    def http_routes(self) -> list[Any]: ...

    def start(self) -> None: ...

    def close(self) -> None: ...


class ChatPlugin(Protocol):
    """One chat platform. ``missing_secrets`` is what ``config check`` reports for it."""

    name: ClassVar[str]

    def __init__(self, settings: Settings, *, stores: Stores | None = None,
                 audit: AuditFn | None = None, console: Console | None = None) -> None: ...

    def backend(self) -> ChatBackend: ...

    def groups(self, chat: ChatBackend) -> GroupResolver | None: ...

    def app(self, chat: ChatBackend, *, desk: ApprovalDesk, slash: SlashHandlers | None,
            home: FleetSource | None) -> ChatApp | None: ...

    @classmethod
    def missing_secrets(cls, settings: Settings) -> list[tuple[str, str]]: ...


@functools.cache
def backends() -> dict[str, str]:
    """Every registered chat backend: name -> "module:Class" (read once)."""
    return dict(plugins.declared(GROUP, BUILTIN))


def names() -> tuple[str, ...]:
    return tuple(sorted(backends()))


def plugin_class(name: str) -> type[ChatPlugin]:
    """The plugin registered as ``name``; ``ConfigError`` naming the choices otherwise."""
    if name not in backends():
        raise ConfigError("key 'chat_backend': " + S.CHECK_UNKNOWN_BACKEND.format(
            name=name, names=", ".join(names())))
    cls = plugins.load(GROUP, name, backends()[name])
    if not isinstance(cls, type) or not callable(getattr(cls, "backend", None)):
        raise plugins.BadEntry(f"{GROUP} entry {name!r} is not a chat backend plugin class")
    found: type[ChatPlugin] = cls
    return found


def make_plugin(settings: Settings, *, stores: Stores | None = None,
                audit: AuditFn | None = None, console: Console | None = None) -> ChatPlugin:
    """The configured platform, made from the settings (checked here, at start)."""
    return plugin_class(settings.chat_backend)(settings, stores=stores, audit=audit,
                                               console=console)


def make_backend(settings: Settings, *, stores: Stores | None = None,
                 audit: AuditFn | None = None, console: Console | None = None) -> ChatBackend:
    """The configured backend; Slack needs SLACK_BOT_TOKEN (checked here, at start).
    With ``stores`` the Slack budget and render ledger are shared in Redis."""
    return make_plugin(settings, stores=stores, audit=audit, console=console).backend()
