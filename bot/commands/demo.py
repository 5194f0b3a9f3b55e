"""`incident-bot demo [--yes]`: the seed story end to end on a simulated host.

The first line is printed before anything heavy is imported or started, and each part of
the world says itself as it starts, so the screen is never blank for long. At the end it
stops everything, removes its folder and says what it stopped (and anything left).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated

import typer
from rich.text import Text

from bot.commands.common import console as make_console
from bot.core import strings
from bot.core.errors import UserError


def register(app: typer.Typer) -> None:
    @app.command(name="demo")
    def demo(
        yes: Annotated[bool, typer.Option(
            "--yes", "-y", help="Approve as the demo on-call user (no typing)")] = False,
        redis_url: Annotated[str | None, typer.Option(
            "--redis-url", metavar="URL",
            help="Use this Redis (default: REDIS_URL, else a private one)")] = None,
    ) -> None:
        """The seed story end to end on a simulated host, terminal chat."""
        if not yes and not sys.stdin.isatty():
            raise UserError(strings.DEMO_NO_TERMINAL, 2)
        run_demo(yes=yes, redis_url=redis_url or os.environ.get("REDIS_URL"))


def run_demo(*, yes: bool, redis_url: str | None) -> None:
    started = time.monotonic()
    console = make_console()
    console.print(Text(strings.DEMO_STARTING))

    def say(line: str) -> None:
        console.print(Text(f"  · {line}", style="dim"))

    import importlib

    from bot.demo.stage import build_stage

    stage = build_stage(redis_url, say, lambda: importlib.import_module("bot.demo.story"))
    from bot.demo import report, story  # loaded by build_stage, once Redis and the host are up
    from bot.jobs import queue
    from storage.stores import open_stores

    try:
        incident_id, job_id = story.run_story(stage, console, yes=yes, ask=console.input,
                                              say=say)
        console.rule("result")
        integrity = report.check_output(stage.spec_path)
        report.print_integrity(console, integrity)
        stores = open_stores(stage.redis_url)
        numbers = report.numbers(queue.status(stores.jobs(), job_id), stage.done_before)
        report.print_numbers(console, numbers)
        report.print_timeline(console, stores.audit().timeline(incident_id))
        report.print_timings(console, stage.timings, stage.waited_s)
        if not integrity.ok:
            raise UserError("the extraction output is incomplete (see above)")
        if not numbers.agree:
            raise UserError(strings.DEMO_NUMBERS_DISAGREE)
    finally:
        closed = stage.close()
        took = time.monotonic() - started
        if closed.left:
            console.print(Text(strings.DEMO_LEFT_BEHIND.format(
                secs=took, what="; ".join(closed.left)), style="red"))
        else:
            console.print(Text(strings.DEMO_FINISHED.format(
                secs=took, stopped=", ".join(closed.stopped), workdir=stage.workdir)))
    if closed.left:
        raise UserError(strings.DEMO_LEFT_BEHIND.format(secs=took, what="; ".join(closed.left)))
