"""`incident-bot config check [FILE] [--probe]`: everything `serve` validates, before it runs.

Each problem is one line naming the file (or ``environment``) and the key:
``config.yaml: key 'hosts.gpu-01.ssh': must look like user@host:port``. The checks are a
list (``CHECKERS``), each a function of the config under check returning its problems;
``serve`` runs the same list at start and stops with the same lines (exit status 2), so a
file that passes here starts. A new kind of config (operator extensions, issue 34) adds
its checker to the list with ``add_checker``; ``--probe`` adds the one that connects.

Exit status: 0 no problem (warnings are printed but pass), 2 problems (a usage or config
error, as everywhere in the CLI).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from bot.commands.common import sub_app
from bot.config.settings import Settings, problem_line, settings_problems
from bot.core import strings
from bot.core.errors import ConfigError, ConfigProblems

ENVIRONMENT = "environment"
WARNING = "warning: "  # a line that starts so is said, and does not fail the check


@dataclass(frozen=True)
class ConfigUnderCheck:
    """What a checker looks at: the settings (built from the keys that were valid), the
    file's name for the lines it writes, and what the bot will run (``alerts_only``)."""

    settings: Settings
    where: str
    alerts_only: bool = False

    def line(self, key: str, msg: str) -> str:
        return problem_line(self.where, (key,), msg)


Checker = Callable[[ConfigUnderCheck], Iterable[str]]


def _raised(where: str, check: Callable[[], object]) -> list[str]:
    """The problem a validator raises, as one line naming the file (validators of the
    ``extra`` sections name the key but not the file)."""
    try:
        check()
    except ConfigError as exc:
        return [exc.message if exc.message.startswith(f"{where}: ") else f"{where}: {exc.message}"]
    return []


def extra_sections(c: ConfigUnderCheck) -> list[str]:
    """Every ``extra`` section, each validated on its own (so each bad one is named),
    the scheduler's and the digests' crontabs included."""
    from bot.config.inventory import diagnostics_settings
    from bot.domain.xid import xid_policy_from_extra
    from bot.extract.config import extract_settings
    from bot.flow.reconcile import reconcile_settings
    from bot.remediation.options import options_from_extra
    from bot.schedule.jobs import load_sections

    s = c.settings
    checks: list[Callable[[], object]] = [
        lambda: diagnostics_settings(s), lambda: options_from_extra(s.extra),
        lambda: load_sections(s.extra), lambda: extract_settings(s.extra),
        lambda: xid_policy_from_extra(s.extra), lambda: reconcile_settings(s.extra)]
    return [line for check in checks for line in _raised(c.where, check)]


def alert_mapping(c: ConfigUnderCheck) -> list[str]:
    """``alerts.kinds`` and the inventory, as the alert endpoints build their mapper."""
    from bot.ingest.mapping import Mapper

    inventory = {name: host.ssh for name, host in c.settings.hosts.items()}
    try:
        Mapper(c.settings.alerts.kinds, inventory)
    except ValueError as exc:
        return [c.line("alerts.kinds", str(exc))]
    return []


def secrets(c: ConfigUnderCheck) -> list[str]:
    """The secrets the configured chat and paging need, from the environment."""
    s, out = c.settings, []
    if not c.alerts_only:  # an alerts-only replica runs no chat and no paging
        out += _chat_secrets(c)
    pd = s.paging.pagerduty
    if pd is not None and pd.routing_key() is None and not c.alerts_only:
        out.append(c.line("paging.pagerduty.routing_key_env", strings.CHECK_NO_ROUTING_KEY.format(
            env=pd.routing_key_env)))
    if s.incident_bot_alert_token is None:
        out.append(WARNING + strings.CHECK_NO_ALERT_TOKEN)
    return out


def _chat_secrets(c: ConfigUnderCheck) -> list[str]:
    """The chat backend is a registered one, and the secrets it needs are set (the
    backend says which: ``ChatPlugin.missing_secrets``)."""
    from bot.chat.backends import names, plugin_class

    s = c.settings
    if s.chat_backend not in names():
        return [c.line("chat_backend", strings.CHECK_UNKNOWN_BACKEND.format(
            name=s.chat_backend, names=", ".join(names())))]
    return [f"{ENVIRONMENT}: {name}: " + strings.CHECK_NO_SECRET.format(why=why)
            for name, why in plugin_class(s.chat_backend).missing_secrets(s)]


def host_files(c: ConfigUnderCheck) -> list[str]:
    """Each host's key and known_hosts: named, there and readable. Warnings, not problems:
    ``serve`` starts without them (a key mounted later works), but the first diagnosis of
    that host would end "unreachable" at 3 a.m. An alerts-only replica logs in nowhere."""
    out: list[str] = []
    if c.alerts_only:
        return out
    for name, host in c.settings.hosts.items():
        for field, path in (("key", host.key), ("known_hosts", host.known_hosts)):
            key = f"hosts.{name}.{field}"
            if not path:
                out.append(WARNING + c.line(key, strings.CHECK_NOT_SET))
            elif not os.access(os.path.expanduser(path), os.R_OK):
                out.append(WARNING + c.line(key, strings.CHECK_UNREADABLE.format(path=path)))
    return out


def reachable_hosts(c: ConfigUnderCheck) -> list[str]:
    """``--probe``: log in to every host (host key checked) and run ``true``."""
    from bot.config.inventory import resolve
    from bot.ssh.base import Command, SSHError
    from bot.ssh.pool import ParamikoPool

    out = []
    s = c.settings
    with ParamikoPool(s.ssh_defaults) as pool:
        for name in s.hosts:
            target = resolve(s, name)
            probe = Command("probe", "true", s.ssh_defaults.command_timeout_s)
            try:
                result = pool.run(target, probe)
            except SSHError as exc:
                out.append(c.line(f"hosts.{name}", strings.CHECK_UNREACHABLE.format(
                    address=target.address, why=exc)))
                continue
            if result.exit_status != 0:
                out.append(c.line(f"hosts.{name}", strings.CHECK_PROBE_FAILED.format(
                    address=target.address, status=result.exit_status)))
    return out


def extension_dirs(c: ConfigUnderCheck) -> list[str]:
    """The directories under ``extensions:``: every file read and checked as ``serve``
    loads it (``FILE: key 'KEY': reason``)."""
    from bot.extensions import load

    return [p.line() for p in load(c.settings.extensions, c.where)[1]]


def policy_actions(c: ConfigUnderCheck) -> list[str]:
    """Each policy's ``match.action`` glob matches a registered action: a built-in, a
    package's, or one of the config's extensions (``ext.*``)."""
    from bot.config.fleet_policy import unmatched_action

    if not c.settings.policies:
        return []
    from bot.extensions import load
    from bot.remediation.actions.operator import action_classes
    from bot.remediation.actions.registry import entry_kinds

    extensions, _ = load(c.settings.extensions, c.where)  # its problems: extension_dirs
    kinds = {*entry_kinds(), *(cls.kind for d in extensions.actions.values()
                               for cls in action_classes(d))}
    out = []
    for i, policy in enumerate(c.settings.policies):
        why = unmatched_action(policy.match.action, kinds)
        if why is not None:
            out.append(c.line(f"policies.{i}.match.action", why))
    return out


CHECKERS: list[Checker] = [extra_sections, alert_mapping, secrets, host_files, policy_actions]


def add_checker(checker: Checker) -> None:
    """Where another kind of config (operator extensions) plugs its validation in."""
    CHECKERS.append(checker)


add_checker(extension_dirs)  # operator extensions (issue 34), through the hook


def check_config(path: str | Path | None, *, alerts_only: bool = False,
                 probe: bool = False) -> tuple[Settings | None, list[str]]:
    """The settings and every problem and warning, one line each (schema first)."""
    where = str(path) if path else ENVIRONMENT
    settings, lines = settings_problems(path)
    if settings is None:
        return None, lines
    under = ConfigUnderCheck(settings, where, alerts_only)
    for checker in [*CHECKERS, *([reachable_hosts] if probe else [])]:
        lines += list(checker(under))
    return (settings if not problems_in(lines) else None), lines


def problems_in(lines: Iterable[str]) -> list[str]:
    return [line for line in lines if not line.startswith(WARNING)]


def load_checked(path: str | Path | None, *, alerts_only: bool = False) -> Settings:
    """``serve``'s start: the settings when the config passes, else ``ConfigProblems``
    (every problem, one line each, exit status 2). Warnings are logged."""
    import logging

    settings, lines = check_config(path, alerts_only=alerts_only)
    problems = problems_in(lines)
    if settings is None or problems:
        raise ConfigProblems(problems)
    for line in lines:
        logging.getLogger(__name__).warning("%s", line.removeprefix(WARNING))
    return settings


_File = Annotated[Path | None, typer.Argument(
    metavar="FILE", help="the config file (default: none, the environment only)",
    show_default=False)]
_Probe = Annotated[bool, typer.Option("--probe", help="also log in to every host over SSH")]
_AlertsOnly = Annotated[bool, typer.Option(
    "--alerts-only", help="check for `serve --alerts-only` (no chat secrets needed)")]


def register(app: typer.Typer) -> None:
    group = sub_app("Check a config file: everything serve validates, one line per problem.")

    @group.command(name="check")
    def check(file: _File = None, probe: _Probe = False, alerts_only: _AlertsOnly = False) -> None:
        """Everything serve validates at start (--probe: and every host reachable)."""
        settings, lines = check_config(file, alerts_only=alerts_only, probe=probe)
        for line in lines:
            typer.echo(line, err=True)
        if settings is None:
            raise ConfigProblems(problems_in(lines), shown=True)
        typer.echo(strings.CHECK_OK.format(where=file or ENVIRONMENT, hosts=len(settings.hosts),
                                           probed=" and reachable" if probe else ""))

    app.add_typer(group, name="config")
