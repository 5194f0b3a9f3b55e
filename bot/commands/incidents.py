"""`incident-bot incidents`: not built yet; the owning issue replaces this module."""

from __future__ import annotations

import typer

from bot.errors import NotBuiltError


def register(app: typer.Typer) -> None:
    @app.command(name="incidents", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def _cmd(ctx: typer.Context) -> None:
        """List incidents; `audit` prints one incident's timeline. (not built yet)"""
        raise NotBuiltError("`incident-bot incidents`")
