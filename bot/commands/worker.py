"""`incident-bot worker --host H`: an RQ forking worker on that host's extraction queue.

Tuned so a killed worker's job runs again on another worker within about a minute
(see ``storage/rq_worker.py``); each work horse dies with its worker.
"""

from __future__ import annotations

from typing import Annotated

import typer

from bot.commands.common import ConfigOpt
from bot.config.settings import load_settings
from bot.core import strings
from bot.core.errors import UserError
from bot.domain.validate import HOST_RE
from bot.extract.config import extract_settings, redact
from bot.extract.worker import prepare_horses
from storage.connection import StorageError as RedisError
from storage.rq_worker import FAST, WorkerTuning, run_worker


def register(app: typer.Typer) -> None:
    @app.command(name="worker")
    def worker(
        host: Annotated[
            str, typer.Option("--host", help="Whose queue to work (inventory host name)")
        ],
        config: ConfigOpt = None,
        url: Annotated[
            str | None, typer.Option("--url", help="Redis URL (overrides config)")
        ] = None,
        burst: Annotated[
            bool, typer.Option("--burst", help="Exit when the queue is empty")
        ] = False,
        name: Annotated[str | None, typer.Option("--name", help="Worker name (unique)")] = None,
        fast: Annotated[
            bool, typer.Option("--fast", help="Second-scale recovery (tests, demo)")
        ] = False,
        log_level: Annotated[str, typer.Option("--log-level")] = "WARNING",
    ) -> None:
        """Run an RQ extraction worker for one host's queue."""
        if not HOST_RE.match(host):
            raise UserError(f"invalid --host {host!r}: letters, digits, '.', '_' or '-'", 2)
        settings = load_settings(config)
        cfg = extract_settings(settings.extra)
        tuning = (
            FAST
            if fast
            else WorkerTuning(
                cfg.job_monitoring_interval,
                cfg.maintenance_interval,
                cfg.abandoned_grace_s,
                cfg.worker_ttl,
            )
        )
        redis_url = url or settings.redis_url
        from bot.extract import job  # the run body: torch loaded once, before horses fork

        prepare_horses(cfg.alerts_url)
        try:
            run_worker(redis_url, host, tuning, run=job.run, burst=burst, name=name,
                       logging_level=log_level.upper())
        except RedisError as exc:
            raise UserError(
                strings.EXTRACT_NO_REDIS.format(url=redact(redis_url), error=exc)
            ) from None
