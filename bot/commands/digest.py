"""`incident-bot digest now`: the health digest on demand, in the terminal.

Same numbers and chart as the scheduled Slack digest (``DigestRunner``), rendered by
the terminal backend: the message is printed and the chart PNG written to ``--out``,
its path printed last so scripts can pick it up.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.chat.terminal import TerminalBackend
from bot.commands.common import ConfigOpt, sub_app
from bot.config.settings import load_settings
from bot.core import strings
from bot.core.errors import UserError
from bot.schedule.jobs import load_sections
from storage.connection import StorageError as RedisError
from storage.stores import open_stores

OutOpt = Annotated[Path, typer.Option("--out", help="Directory for the chart PNG")]
HoursOpt = Annotated[float, typer.Option("--hours", help="Period ending now, in hours")]
MAX_HOURS = 744.0  # a month: samples are kept eight days by default anyway

if TYPE_CHECKING:
    from bot.digest.runner import DigestResult


def digest_now(config: Path | None, out: Path, hours: float) -> DigestResult:
    from bot.digest.runner import AuditActions, DigestRunner, StoreIncidents  # matplotlib: lazy

    if not 0 < hours <= MAX_HOURS:
        raise UserError(f"--hours must be more than 0 and at most {MAX_HOURS:g}, got {hours:g}", 2)
    settings = load_settings(config)
    _, digest_cfg, _ = load_sections(settings.extra)
    stores = open_stores(settings.redis_url)
    try:
        stores.ping()
    except RedisError as exc:
        raise UserError(f"cannot reach Redis at {settings.redis_url}: {exc}") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create output directory {out}: {exc.strerror}", 2) from None
    runner = DigestRunner(stores.samples(), TerminalBackend(), out,
                          incidents=StoreIncidents(stores.incidents()),
                          actions=AuditActions(stores.audit()), cfg=digest_cfg,
                          rma=stores.health_history().rma)
    try:
        return runner.now("terminal", hours)
    finally:
        stores.close()


def register(app: typer.Typer) -> None:
    group = sub_app("Health digests: GPU memory and utilisation, disks, incidents.")

    @group.command(name="now")
    def now(config: ConfigOpt = None, out: OutOpt = Path("digests"),
            hours: HoursOpt = 24.0) -> None:
        """Render the digest for the last --hours now; write the chart and print its path."""
        result = digest_now(config, out, hours)
        if result.chart is None:
            raise UserError("the digest was printed but its chart could not be drawn (see log)")
        typer.echo(strings.DIGEST_CHART_WRITTEN.format(path=result.chart.resolve()))

    app.add_typer(group, name="digest")
