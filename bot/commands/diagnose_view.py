"""``incident-bot diagnose``'s readable form (a diagnosis as ``--json`` prints it, read back
by ``Diagnosis.from_dict``), shared by the command and the path that asks a running serve
(``diagnose_client``): in its own module, so neither imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from bot.domain.findings import Diagnosis

_SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


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
