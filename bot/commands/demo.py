"""`incident-bot demo [--yes]`: the seed story end to end on a simulated host."""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated

import typer
from rich.console import Console

from bot.core.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command(name="demo")
    def demo(
        yes: Annotated[bool, typer.Option(
            "--yes", help="Approve as the demo on-call user")] = False,
        redis_url: Annotated[str | None, typer.Option(
            "--redis-url", help="Use this Redis (default: REDIS_URL, else a private one)")] = None,
    ) -> None:
        """The seed story end to end on a simulated host, terminal chat."""
        if not yes and not sys.stdin.isatty():
            raise UserError("no terminal to approve from: run `incident-bot demo --yes`", 2)
        run_demo(yes=yes, redis_url=redis_url or os.environ.get("REDIS_URL"))


def run_demo(*, yes: bool, redis_url: str | None) -> None:
    from bot.demo import report, story
    from bot.demo.stage import build_stage
    from bot.flow.assembly import build_flow  # noqa: F401 - import cost before timing
    from storage.stores import open_stores

    console = Console(highlight=False)
    started = time.monotonic()
    stage = build_stage(redis_url)
    try:
        incident_id = story.run_story(stage, console, yes=yes, ask=console.input)
        console.rule("result")
        integrity = report.check_output(stage.spec_path)
        report.print_integrity(console, integrity)
        report.print_timeline(console, open_stores(stage.redis_url).audit().timeline(incident_id))
        report.print_timings(console, stage.timings)
        if not integrity.ok:
            raise UserError("the extraction output is incomplete (see above)")
    finally:
        stage.close()
    console.print(f"demo finished in {time.monotonic() - started:.1f}s; nothing left running")
