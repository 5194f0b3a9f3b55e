"""`incident-bot extract submit|status|pause|resume|cancel`: extraction jobs from a shell.

Same API the bot uses (``bot.jobs.queue``), so the terminal, ``/ir jobs`` and the
incident thread all show the same numbers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from bot.commands.common import ConfigOpt, JsonOpt, sub_app
from bot.config.settings import load_settings
from bot.core import strings
from bot.core.errors import UserError
from bot.domain.validate import valid_job_id
from bot.extract.config import redact
from bot.extract.spec import load_spec
from bot.jobs import queue
from bot.jobs.progress import render_bar
from bot.jobs.states import FINAL, RESUMABLE, JobStatus
from bot.jobs.status import final_summary
from storage.connection import StorageError as RedisError
from storage.jobs import JobStore
from storage.stores import open_stores

T = TypeVar("T")
UrlOpt = Annotated[str | None, typer.Option("--url", help="Redis URL (overrides config)")]
JobArg = Annotated[str, typer.Argument(help="Job id, e.g. ex-0123456789ab")]


def job_id(text: str) -> str:
    if not valid_job_id(text.strip()):
        raise UserError(f"invalid job id {text!r}: expected ex- and 12 hex digits", 2)
    return text.strip()


@contextmanager
def _jobs(config: Path | None, url: str | None) -> Iterator[JobStore]:
    redis_url = url or load_settings(config).redis_url
    stores = open_stores(redis_url)
    try:
        yield stores.jobs()
    except RedisError as exc:
        raise UserError(strings.EXTRACT_NO_REDIS.format(url=redact(redis_url), error=exc)) from None
    finally:
        stores.close()


def _with(config: Path | None, url: str | None, fn: Callable[[JobStore], T]) -> T:
    with _jobs(config, url) as jobs:
        return fn(jobs)


def status_lines(s: JobStatus) -> list[str]:
    """Pure: what ``extract status JOB`` prints."""
    lines = [f"{s.job_id}  {s.name}  on {s.host}  [{s.state.value}]", render_bar(s.progress)]
    if s.message:
        lines.append(s.message)
    if s.state in FINAL or s.state in RESUMABLE:
        lines.append(final_summary(s))
    elif s.last_error:
        lines.append(f"last error: {s.last_error}")
    lines.append(f"output: {s.output_dir}")
    return lines


def table_lines(jobs: list[JobStatus]) -> list[str]:
    rows = [f"{'JOB':<16} {'STATE':<12} {'HOST':<14} {'NAME':<24} PROGRESS"]
    rows += [
        f"{s.job_id:<16} {s.state.value:<12} {s.host:<14} {s.name[:24]:<24} "
        f"{render_bar(s.progress)}"
        for s in jobs
    ]
    return rows


def _watch(conn: JobStore, ident: str, interval: float) -> JobStatus:
    """A rich progress bar until the job stops moving."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[line]}"),
    )
    current = queue.status(conn, ident)
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(current.name or ident, total=max(1, current.total), line="")
        while True:
            line = render_bar(current.progress).split(" · ", 1)[-1]
            bar.update(
                task,
                completed=current.done,
                total=max(1, current.total),
                line=f"{line} [{current.state.value}]",
            )
            if current.state in FINAL or current.state in RESUMABLE:
                return current
            time.sleep(interval)
            current = queue.status(conn, ident)


def _echo_status(s: JobStatus, as_json: bool) -> None:
    typer.echo(json.dumps(s.to_dict(), indent=2) if as_json else "\n".join(status_lines(s)))


def register(app: typer.Typer) -> None:
    extract = sub_app("Resumable hidden-state extraction jobs.")

    @extract.command("submit")
    def submit(
        spec: Annotated[Path, typer.Argument(help="Job spec (YAML or JSON)")],
        host: Annotated[str | None, typer.Option("--host", help="Run on this host's queue")] = None,
        incident: Annotated[str | None, typer.Option("--incident", help="Report to INC-N")] = None,
        config: ConfigOpt = None,
        url: UrlOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Validate SPEC and its dataset, then queue the job."""
        parsed = load_spec(spec)
        ident = _with(
            config, url, lambda r: queue.submit(r, parsed, host=host, incident_id=incident)
        )
        current = _with(config, url, lambda r: queue.status(r, ident))
        if as_json:
            typer.echo(json.dumps(current.to_dict(), indent=2))
        else:
            typer.echo(
                strings.EXTRACT_SUBMITTED.format(
                    job=ident, total=f"{current.total:,}", queue=current.host
                )
            )

    @extract.command("status")
    def status(
        job: Annotated[str | None, typer.Argument(help="Job id (omit to list jobs)")] = None,
        host: Annotated[str | None, typer.Option("--host", help="Only this host's jobs")] = None,
        watch: Annotated[bool, typer.Option("--watch", help="Live progress bar")] = False,
        interval: Annotated[float, typer.Option("--interval", min=0.1)] = 1.0,
        config: ConfigOpt = None,
        url: UrlOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """One job's progress, or every job (newest first)."""
        if job is None:
            jobs = _with(config, url, lambda r: queue.list_jobs(r, host))
            if as_json:
                typer.echo(json.dumps([s.to_dict() for s in jobs], indent=2))
            else:
                typer.echo("\n".join(table_lines(jobs)) if jobs else strings.EXTRACT_NO_JOBS)
            return
        ident = job_id(job)
        if watch:
            _echo_status(_with(config, url, lambda r: _watch(r, ident, interval)), as_json)
        else:
            _echo_status(_with(config, url, lambda r: queue.status(r, ident)), as_json)

    def _control(name: str, fn: Callable[[JobStore, str], JobStatus], message: str) -> None:
        @extract.command(name)
        def _cmd(
            job: JobArg, config: ConfigOpt = None, url: UrlOpt = None, as_json: JsonOpt = False
        ) -> None:
            ident = job_id(job)
            current = _with(config, url, lambda r: fn(r, ident))
            if as_json:
                typer.echo(json.dumps(current.to_dict(), indent=2))
            else:
                typer.echo(message.format(job=ident, run=current.runs))

        _cmd.__doc__ = {
            "pause": "Pause a job after its batch in flight.",
            "resume": "Queue a paused, interrupted or failed job again.",
            "cancel": "Cancel a job (files already written stay).",
        }[name]

    _control("pause", queue.pause, strings.EXTRACT_PAUSE_REQUESTED)
    _control("resume", queue.resume, strings.EXTRACT_RESUME_QUEUED)
    _control("cancel", queue.cancel, strings.EXTRACT_CANCEL_REQUESTED)
    app.add_typer(extract, name="extract")
