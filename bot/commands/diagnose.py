"""`incident-bot diagnose TARGET --playbook NAME|auto [--json]`: one diagnosis over SSH.

With ``INCIDENT_BOT_URL`` and ``INCIDENT_BOT_DIAGNOSE_TOKEN`` set, an inventory name is
asked of the running ``serve`` (its warm pool; ``diagnose_client``), else diagnosed over
this machine's own connection (issue 37).

Exit status: 0 when diagnosed (findings or not, ``partial`` included), 1 when the host
is unreachable (connect, host key, auth), 2 for bad arguments or config.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.commands.common import ConfigOpt, choices, playbook_names
from bot.commands.diagnose_view import render
from bot.core import strings as S
from bot.core.errors import UserError

if TYPE_CHECKING:  # imported where used: a person's diagnose should not wait on imports

    from bot.ssh.base import SSHTarget
    from bot.ssh.settings import SSHSettings
    from playbooks.base import PlaybookOptions

def run_diagnose(target_spec: str, playbook: str, *, as_json: bool,
                 config: str | Path | None,
                 ssh_key: str | None, known_hosts: str | None) -> int:
    """A running ``serve`` first, when one is configured (``diagnose_client``: its warm
    pool, nothing heavy imported here); else this machine's own connection."""
    from bot.commands import diagnose_client

    answer = (diagnose_client.ask(target_spec, playbook)
              if not (ssh_key or known_hosts) else None)
    has_key = bool(ssh_key)
    if answer is None:
        answer, has_key = _diagnose_here(target_spec, playbook, config, ssh_key, known_hosts)
    if as_json:
        print(json.dumps(answer), flush=True)
    if answer.get("status") == "unreachable":  # one line, said once: no tables
        raise UserError(diagnose_client.unreachable_line(answer, has_key=has_key), 1)
    if not as_json:
        from bot.commands.common import console
        from bot.domain.findings import Diagnosis

        render(Diagnosis.from_dict(answer), console())
    return 0


def _diagnose_here(target_spec: str, playbook: str, config: str | Path | None,
                   ssh_key: str | None, known_hosts: str | None) -> tuple[dict[str, Any], bool]:
    """Over this machine's own SSH connection: the diagnosis, and whether a key was
    given. Without ``--config`` (an address, a key and a known_hosts file given) the
    settings are not loaded at all: nothing in them applies, and their import alone is a
    good part of a person's wait."""
    from bot.ssh.pool import ParamikoPool
    from playbooks import names, run_playbook

    if playbook not in names():
        raise UserError(S.DIAG_UNKNOWN_PLAYBOOK.format(name=playbook, names=", ".join(names())), 2)
    for flag, path in (("--ssh-key", ssh_key), ("--known-hosts", known_hosts)):
        if path and not os.path.isfile(os.path.expanduser(path)):
            raise UserError(f"{flag}: no such file: {path}", 2)
    if config is None and "@" in target_spec:
        target, options, ssh = _ad_hoc(target_spec, ssh_key, known_hosts)
    else:
        from bot.config.inventory import options_for, resolve
        from bot.config.settings import load_settings

        settings = load_settings(config)
        if settings.extensions:  # the config's operator extensions add their findings
            from bot.extensions import load_and_install

            load_and_install(settings.extensions, str(config))
        target = resolve(settings, target_spec, key=ssh_key, known_hosts=known_hosts)
        options, ssh = options_for(settings, target), settings.ssh_defaults
    with ParamikoPool(ssh) as pool:
        diagnosis = run_playbook(pool, target, playbook, options=options)
    return diagnosis.to_dict(), target.key_path is not None


def _ad_hoc(spec: str, ssh_key: str | None,
            known_hosts: str | None) -> tuple[SSHTarget, PlaybookOptions, SSHSettings]:
    """``user@host:port`` with the defaults a config without this host would give it."""
    from bot.ssh.base import SSHTarget
    from bot.ssh.settings import SSHSettings
    from playbooks.base import PlaybookOptions

    def path(p: str | None) -> str | None:
        return os.path.expanduser(p) if p else None

    try:
        target = SSHTarget.parse(spec, key_path=path(ssh_key), known_hosts=path(known_hosts))
    except ValueError:
        raise UserError(S.DIAG_BAD_TARGET.format(target=spec), 2) from None
    return target, PlaybookOptions(), SSHSettings()


if TYPE_CHECKING:
    PlaybookName = str
else:
    PlaybookName = choices(playbook_names())
_Target = Annotated[str, typer.Argument(metavar="TARGET",
                                        help="inventory host name or user@host:port")]
_Playbook = Annotated[PlaybookName, typer.Option(
    "--playbook", "-p", help="the playbook (auto: chosen from the host's state)")]
_Json = Annotated[bool, typer.Option("--json", help="print one JSON object (DESIGN's contract)")]
_Key = Annotated[str | None, typer.Option("--ssh-key", metavar="FILE",
                                          help="private key (overrides config)")]
_Known = Annotated[str | None, typer.Option("--known-hosts", metavar="FILE",
                                            help="known_hosts file (overrides config)")]


def register(app: typer.Typer) -> None:
    @app.command(name="diagnose")
    def _cmd(target: _Target, playbook: _Playbook = "auto", as_json: _Json = False,
             config: ConfigOpt = None, ssh_key: _Key = None, known_hosts: _Known = None) -> None:
        """Run a diagnostic playbook on TARGET over SSH."""
        code = run_diagnose(target, playbook, as_json=as_json, config=config, ssh_key=ssh_key,
                            known_hosts=known_hosts)
        if code:
            raise typer.Exit(code)
