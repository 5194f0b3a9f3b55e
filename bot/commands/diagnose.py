"""`incident-bot diagnose TARGET --playbook NAME|auto [--json]`: one diagnosis over SSH.

Exit status: 0 when diagnosed (findings or not, ``partial`` included), 1 when the host
is unreachable (connect, host key, auth), 2 for bad arguments or config.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.commands.common import ConfigOpt, choices, playbook_names
from bot.core import strings as S
from bot.core.errors import UserError

if TYPE_CHECKING:  # imported where used: a person's diagnose should not wait on imports
    from rich.console import Console
    from rich.table import Table

    from bot.domain.findings import Diagnosis

_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def run_diagnose(target_spec: str, playbook: str, *, as_json: bool,
                 config: str | Path | None,
                 ssh_key: str | None, known_hosts: str | None) -> int:
    from bot.config.inventory import options_for, resolve
    from bot.config.settings import load_settings
    from bot.domain.findings import DiagnosisStatus
    from bot.ssh.pool import ParamikoPool
    from playbooks import names, run_playbook

    if playbook not in names():
        raise UserError(S.DIAG_UNKNOWN_PLAYBOOK.format(name=playbook, names=", ".join(names())), 2)
    for flag, path in (("--ssh-key", ssh_key), ("--known-hosts", known_hosts)):
        if path and not os.path.isfile(os.path.expanduser(path)):
            raise UserError(f"{flag}: no such file: {path}", 2)
    settings = load_settings(config)
    if settings.extensions:  # the config's operator extensions add their findings
        from bot.extensions import load_and_install

        load_and_install(settings.extensions, str(config))
    target = resolve(settings, target_spec, key=ssh_key, known_hosts=known_hosts)
    with ParamikoPool(settings.ssh_defaults) as pool:
        diagnosis = run_playbook(pool, target, playbook, options=options_for(settings, target))
    if as_json:
        print(json.dumps(diagnosis.to_dict()), flush=True)
    if diagnosis.status is DiagnosisStatus.UNREACHABLE:  # one line, said once: no tables
        raise UserError(unreachable_line(diagnosis, has_key=target.key_path is not None), 1)
    if not as_json:
        from bot.commands.common import console

        render(diagnosis, console())
    return 0


def unreachable_line(d: Diagnosis, *, has_key: bool) -> str:
    """Why the host could not be read, and what to pass when no key was given."""
    finding = d.findings[0]
    line = f"{finding.title} ({finding.evidence.get('address', d.host)}): {finding.detail}"
    if finding.code == "ssh.auth_failed" and not has_key:
        line += S.DIAG_NO_KEY_HINT
    return line


def render(d: Diagnosis, console: Console) -> None:
    """The readable form: a header line, findings, proposed actions, probes."""
    from bot.domain.headline import choose
    from bot.remediation.actions import fixes_of

    console.print(f"[bold]{_plain(d.host)}[/] · {d.playbook} · {d.status.value} · "
                  f"{d.duration_s:.2f} s")
    headline = choose(d, fixes_of)  # the same rule and words as the Slack message
    console.print(f"[bold]{_plain(headline.text)}[/]")
    if headline.context:
        console.print(_plain(headline.context))
    findings = _table("Findings", "severity", "code", "finding")
    for f in d.findings:
        style = _SEVERITY_STYLE.get(f.severity.value, "")
        findings.add_row(f"[{style}]{f.severity.value}[/]", _plain(f.code), _plain(f.title))
    console.print(findings)
    _per_gpu(d, console)
    if d.actions:
        actions = _table("Proposed actions", "id", "action", "params", "why")
        for a in d.actions:
            params = " ".join(f"{k}={v}" for k, v in a.params.items())
            actions.add_row(_plain(a.id), _plain(a.kind), _plain(params), _plain(a.reason))
        console.print(actions)
    probes = _table("Probes", "probe", "exit", "seconds", "note")
    for p in d.probes:
        note = "timed out" if p.timed_out else (p.error or ("truncated" if p.truncated else ""))
        probes.add_row(_plain(p.name), str(p.exit_status), f"{p.duration_s:.2f}", _plain(note))
    console.print(probes)


def _per_gpu(d: Diagnosis, console: Console) -> None:
    """The per-GPU tables, as plain text: the holders' (memory, utilisation, PID, unit)
    and the verdict grid, as the Slack thread shows them."""
    from bot.chat.summary import evidence_table

    table = evidence_table(d)
    if table is not None:
        console.print(table.text, markup=False, highlight=False)
        console.print(table.code or "", markup=False, highlight=False)
    for f in d.findings:
        if isinstance(f.evidence.get("grid"), str):
            console.print(f.evidence["grid"], markup=False, highlight=False)


def _table(title: str, *columns: str) -> Table:
    """Wrap long values instead of cutting them: unit names must stay readable."""
    from rich.table import Table

    table = Table(title=title, expand=True)
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def _plain(text: str) -> str:
    """Host text must not be read as rich markup (nor ``:ab:`` as an emoji: the console
    is built with ``emoji=False``)."""
    from bot.commands.common import plain

    return plain(text)


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
