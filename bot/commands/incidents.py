"""`incident-bot incidents`, `incident-bot audit INCIDENT`, `incident-bot silence ...`.

Read-mostly views over the same Redis the service uses, so they show what every
replica sees. Output is plain text for people, ``--json`` for scripts.
"""

from __future__ import annotations

import getpass
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from bot.chat.text import visible
from bot.commands.common import ConfigOpt, JsonOpt, sub_app
from bot.config.settings import load_settings
from bot.core import strings as S
from bot.core.errors import UserError
from bot.domain.durations import DurationError
from bot.domain.durations import parse_duration as duration_s
from bot.domain.incident import Incident
from storage.audit import AuditEntry
from storage.connection import StorageError as RedisError
from storage.stores import Stores, open_stores

T = TypeVar("T")
_ID = re.compile(r"^(?:INC-)?(\d{1,12})$", re.IGNORECASE)


def fmt_time(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def parse_duration(text: str) -> float:
    """``--for 30m``: the one duration grammar (``bot/domain/durations.py``)."""
    try:
        return duration_s(text)
    except DurationError as exc:
        raise UserError(f"invalid duration: {exc}", 2) from None


def incident_id(text: str) -> str:
    """``42``, ``inc-42`` and ``INC-42`` all name INC-42; anything else is refused."""
    match = _ID.match(text.strip())
    if not match:
        raise UserError(f"invalid incident id {text!r}: expected INC-<number>", 2)
    return f"INC-{int(match.group(1))}"


@contextmanager
def _stores(config: Path | None) -> Iterator[Stores]:
    settings = load_settings(config)
    stores = open_stores(settings.redis_url)
    try:
        yield stores
    except RedisError as exc:
        raise UserError(S.INCIDENTS_REDIS_DOWN.format(url=settings.redis_url, reason=exc)) from None
    finally:
        stores.close()


def with_stores(config: Path | None, fn: Callable[[Stores], T]) -> T:
    """``fn`` on the stores of the configured Redis; unreachable is a ``UserError``."""
    with _stores(config) as stores:
        return fn(stores)


def incident_rows(incidents: list[Incident]) -> list[str]:
    """One line per incident, children indented under their parent."""
    lines = [f"{'ID':<10} {'STATE':<18} {'KIND':<11} {'HOST':<16} {'COUNT':>5}  "
             f"{'LAST SEEN':<20} SUMMARY"]
    for inc in incidents:
        host = inc.host if not inc.is_parent else f"{inc.host} +{len(inc.hosts) - 1}"
        ident = f"  {inc.id}" if inc.parent_id else inc.id
        lines.append(f"{ident:<10} {inc.state.value:<18} {inc.kind:<11} {host:<16} "
                     f"{inc.count:>5}  {fmt_time(inc.last_seen):<20} {inc.summary[:60]}")
    return lines


def timeline_rows(entries: list[AuditEntry]) -> list[str]:
    lines = []
    for e in entries:
        detail = json.dumps(e.detail, sort_keys=True, separators=(",", ":"))
        evidence = f"  evidence={e.evidence_hash}" if e.evidence_hash else ""
        lines.append(f"{fmt_time(e.ts)}  {e.actor:<20} {e.action:<18} {detail}{evidence}")
    return lines


def _print(lines: list[str]) -> None:
    """Alert and host text in the rows is shown with its hidden characters spelled out."""
    typer.echo(visible("\n".join(lines)))


def register(app: typer.Typer) -> None:
    @app.command(name="incidents")
    def incidents(config: ConfigOpt = None, as_json: JsonOpt = False,
                  all_: Annotated[bool, typer.Option("--all", help="Include resolved")] = False,
                  limit: Annotated[int, typer.Option(help="At most this many, newest")] = 200,
                  ) -> None:
        """List open incidents (--all: resolved too)."""
        found = with_stores(config, lambda s: s.incidents().list(open_only=not all_,
                                                                  limit=limit))
        if as_json:
            typer.echo(json.dumps([i.to_dict() for i in found], indent=2))
            return
        _print(incident_rows(found) if found else [S.INCIDENTS_NONE])

    @app.command(name="audit")
    def audit(incident: Annotated[str, typer.Argument(help="Incident id, e.g. INC-42")],
              config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
        """Print one incident's timeline: who did what, when, with the evidence hash."""
        ident = incident_id(incident)

        def read(s: Stores) -> list[AuditEntry]:
            if s.incidents().get(ident) is None:
                raise UserError(S.INCIDENTS_UNKNOWN.format(incident_id=ident))
            return s.audit().timeline(ident)

        entries = with_stores(config, read)
        if as_json:
            typer.echo(json.dumps([e.to_dict() for e in entries], indent=2))
            return
        _print(timeline_rows(entries) or [S.AUDIT_EMPTY.format(incident_id=ident)])

    app.add_typer(_silence_app(), name="silence")


def _silence_app() -> typer.Typer:
    silence = sub_app("Silence alerts per host and kind ('*' for any).")

    @silence.command(name="add")
    def add(host: str, kind: str, config: ConfigOpt = None,
            for_: Annotated[str, typer.Option("--for", help="e.g. 30m, 2h, 1d")] = "1h",
            author: Annotated[str | None, typer.Option("--by", help="Who (default: $USER)")] = None,
            reason: Annotated[str, typer.Option(help="Why")] = "") -> None:
        """Drop firing alerts for HOST/KIND until the silence ends."""
        seconds = parse_duration(for_)
        who = author or getpass.getuser()

        def do(s: Stores) -> Any:
            try:
                return s.silences().add(host, kind, seconds, who, reason)
            except ValueError as exc:
                raise UserError(S.SILENCE_BAD.format(reason=exc), 2) from None

        s = with_stores(config, do)
        typer.echo(S.SILENCE_ADDED.format(host=host, kind=kind, until=fmt_time(s.until),
                                          author=s.author))

    @silence.command(name="remove")
    def remove(host: str, kind: str, config: ConfigOpt = None) -> None:
        """End a silence now."""
        gone = with_stores(config, lambda s: s.silences().remove(host, kind, getpass.getuser()))
        if not gone:
            raise UserError(S.SILENCE_NOT_FOUND.format(host=host, kind=kind))
        typer.echo(S.SILENCE_REMOVED.format(host=host, kind=kind))

    @silence.command(name="list")
    def list_(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
        """Active silences, then the recurring maintenance windows."""
        found, windows = with_stores(config, lambda s: (s.silences().list(),
                                                         s.silences().maintenance()))
        if as_json:
            typer.echo(json.dumps([json.loads(s.to_json()) for s in found], indent=2))
            return
        now = time.time()
        lines = [f"{s.host}/{s.kind}  until {fmt_time(s.until)} ({int(s.until - now)}s)  "
                 f"by {s.author}  {s.reason}" for s in found]
        _print([*(lines or [S.SILENCES_NONE]), *[S.SILENCE_MAINTENANCE.format(
            hosts=w.hosts, kinds=",".join(w.kinds) or "*", every=w.window.text,
            reason=w.reason) for w in windows]])

    return silence
