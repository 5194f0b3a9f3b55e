"""`incident-bot postmortem INC-N [--format md|json]`: the incident's retrospective timeline.

Reads the incident and its audit stream from the same Redis the service writes, so any
replica's actions are in it; the building and rendering are pure (``bot/digest``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from bot.commands.common import ConfigOpt
from bot.commands.incidents import incident_id, with_stores
from bot.core import strings as S
from bot.core.errors import UserError
from bot.digest.postmortem import Postmortem
from bot.digest.postmortem_render import to_json, to_markdown
from bot.digest.postmortem_source import load_postmortem
from storage.stores import Stores

FORMATS = {"md": to_markdown, "json": to_json}


def _required(stores: Stores, ident: str) -> Postmortem:
    """The postmortem of ``ident``; a ``UserError`` when there is no such incident."""
    found = load_postmortem(stores.incidents(), stores.audit(), ident)
    if found is None:
        raise UserError(S.PM_UNKNOWN_INCIDENT.format(incident_id=ident))
    return found


def register(app: typer.Typer) -> None:
    @app.command(name="postmortem")
    def postmortem(incident: Annotated[str, typer.Argument(metavar="INCIDENT",
                                                           help="Incident id, e.g. INC-42")],
                   config: ConfigOpt = None,
                   fmt: Annotated[Literal["md", "json"], typer.Option(
                       "--format", help="Markdown or JSON")] = "md",
                   ) -> None:
        """Print an incident's postmortem timeline as Markdown (or JSON)."""
        render = FORMATS[fmt]  # the choice is typer's: anything else is a usage error
        ident = incident_id(incident)
        typer.echo(render(with_stores(config, lambda s: _required(s, ident))), nl=False)
