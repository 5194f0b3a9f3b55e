"""`incident-bot extensions check DIR` and `incident-bot extensions test DIR --host TARGET`.

``check`` reads a directory as ``serve`` would (``bot/extensions/loader.py``): one line
per problem naming the file, the key and the reason (exit status 2), or a summary.
``test`` runs the directory's probes on a host over SSH (host key checked, as every
diagnosis) and prints what each answered and the findings, and proposals, it would raise;
nothing is changed on the host and nothing is stored.

Exit status: 0 checked (findings or not), 1 the host could not be reached, 2 a problem
in the directory, the arguments or the config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.commands.common import ConfigOpt, sub_app
from bot.core import strings as S
from bot.core.errors import ConfigProblems, UserError
from bot.domain.extension import Extensions

_Dir = Annotated[Path, typer.Argument(metavar="DIR", help="a directory of extension files",
                                      show_default=False)]
_Host = Annotated[str, typer.Option("--host", metavar="TARGET",
                                    help="inventory host name or user@host:port")]
_Playbook = Annotated[str | None, typer.Option(
    "--playbook", "-p", metavar="NAME",
    help="only the findings that apply to this playbook (default: every finding)")]
_Key = Annotated[str | None, typer.Option("--ssh-key", metavar="FILE",
                                          help="private key (overrides config)")]
_Known = Annotated[str | None, typer.Option("--known-hosts", metavar="FILE",
                                            help="known_hosts file (overrides config)")]


def checked(directory: Path) -> Extensions:
    """The directory's extensions, or ``ConfigProblems`` (every problem, exit status 2)."""
    from bot.extensions import load

    extensions, problems = load([str(directory)], where="extensions")
    if problems:
        raise ConfigProblems([p.line() for p in problems])
    return extensions


def run_check(directory: Path) -> str:
    extensions = checked(directory)
    files = {p.source for p in extensions.probes.values()} | \
        {f.source for f in extensions.findings} | {a.source for a in extensions.actions.values()}
    return S.EXT_CHECK_OK.format(where=directory, files=len(files),
                                 probes=len(extensions.probes),
                                 findings=len(extensions.findings),
                                 actions=len(extensions.actions))


def run_test(directory: Path, host: str, *, playbook: str | None, config: Path | None,
             ssh_key: str | None, known_hosts: str | None) -> list[str]:
    """The lines ``extensions test`` prints (``UserError`` exit 1 when unreachable)."""
    from concurrent.futures import ThreadPoolExecutor

    from bot.config.inventory import options_for, resolve
    from bot.config.settings import load_settings
    from bot.ssh.base import SSHError
    from bot.ssh.pool import ParamikoPool
    from playbooks.base import Report, Session
    from playbooks.extension import assess

    extensions = checked(directory)
    settings = load_settings(config)
    target = resolve(settings, host, key=ssh_key, known_hosts=known_hosts)
    report = Report(target.name)
    with ParamikoPool(settings.ssh_defaults) as pool, ThreadPoolExecutor(8) as ex:
        session = Session(pool, target, options_for(settings, target), ex)
        try:
            results = assess(session, playbook, report, extensions)
        except SSHError as exc:
            raise UserError(S.DIAG_UNREACHABLE.format(host=target.name, reason=exc), 1) from None
    lines = [S.EXT_TEST_HEADER.format(host=target.name, n=len(results),
                                      found=len(report.findings),
                                      playbook=playbook or "every playbook")]
    for r in results:
        first = next((ln for ln in r.stdout.splitlines() if ln.strip()), "")
        lines.append(S.EXT_TEST_PROBE.format(
            name=r.name, status=r.exit_status, timed_out=" (timed out)" if r.timed_out else "",
            secs=r.duration_s, stdout=repr(first[:120])))
    for f in report.findings:
        lines.append(S.EXT_TEST_FINDING.format(severity=f.severity.value, code=f.code,
                                               title=f.title))
    for a in report.actions:
        params = " ".join(f"{k}={v}" for k, v in a.params.items())
        lines.append(S.EXT_TEST_PROPOSES.format(kind=a.kind, params=params))
    if not report.findings:
        lines.append(S.EXT_TEST_NONE)
    return lines


def register(app: typer.Typer) -> None:
    group = sub_app("Operator extensions (YAML probes, findings, actions): check and test.")

    @group.command(name="check")
    def check(directory: _Dir) -> None:
        """Read DIR as serve would: one line per problem (file, key, reason)."""
        typer.echo(run_check(directory))

    @group.command(name="test")
    def test(directory: _Dir, host: _Host, playbook: _Playbook = None, config: ConfigOpt = None,
             ssh_key: _Key = None, known_hosts: _Known = None) -> None:
        """Run DIR's probes on a host and show the findings they would raise."""
        for line in run_test(directory, host, playbook=playbook, config=config,
                             ssh_key=ssh_key, known_hosts=known_hosts):
            typer.echo(line)

    app.add_typer(group, name="extensions")
