"""`incident-bot worker`: not built yet; the owning issue replaces this module."""

from __future__ import annotations

import typer

from bot.errors import NotBuiltError


def register(app: typer.Typer) -> None:
    @app.command(name="worker", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def _cmd(ctx: typer.Context) -> None:
        """Run an RQ extraction worker for one host's queue. (not built yet)"""
        raise NotBuiltError("`incident-bot worker`")
