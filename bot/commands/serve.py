"""`incident-bot serve --config FILE`: not built yet; the alerts issue replaces this module."""

from __future__ import annotations

from pathlib import Path

import typer

from bot.errors import NotBuiltError
from bot.settings import load_settings


def register(app: typer.Typer) -> None:
    @app.command(name="serve")
    def serve(config: Path = typer.Option(None, "--config", help="YAML config file")) -> None:
        """HTTP service: Slack events, alert webhooks, health and metrics (not built yet)."""
        load_settings(config)
        raise NotBuiltError("`incident-bot serve`")
