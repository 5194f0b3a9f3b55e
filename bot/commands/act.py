"""`incident-bot act TARGET KIND key=value...`: one catalog action from the terminal.

The same path as a Slack approval: validate, show the exact commands, ask (unless
``--yes``), capture, act with deadlines, verify, audit. The actor is the local user;
outside an incident the audit goes under ``cli-<unix time>``. A real run refuses to
start when the audit log (Redis) is unreachable; ``--dry-run`` touches nothing.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer

from bot.commands.common import ConfigOpt, action_kinds, choices
from bot.config.inventory import resolve
from bot.config.settings import Settings, env_redis_url, load_settings
from bot.core import strings
from bot.core.errors import UserError
from bot.domain.action_result import ActionResult, Outcome, Seen, Verification
from bot.remediation import catalog
from bot.remediation.cleanup import unfinished_output_dirs
from bot.remediation.executor import AuditSink, audit_refusal, cli_incident_id, execute
from bot.remediation.followup import chain_resumes, offers
from bot.remediation.options import RemediationOptions, options_from_extra
from bot.remediation.reboot import read_boot_id, requested, wait_back
from bot.ssh.base import SSHTarget

if TYPE_CHECKING:
    from storage.jobs import JobStore


def resolve_target(settings: Settings, spec: str, key: str | None,
                   known_hosts: str | None) -> SSHTarget:
    """An inventory name from the config, or ``user@host:port``; flags override the config."""
    return resolve(settings, spec, key=key, known_hosts=known_hosts)


def _audit_log(settings: Settings,
               required: bool) -> tuple[AuditSink | None, JobStore | None]:
    """(AuditLog, the extraction queue), or (None, None) when Redis is optional."""
    from storage.connection import StorageError as RedisError
    from storage.stores import open_stores

    url = env_redis_url(settings.redis_url) or settings.redis_url
    stores = open_stores(url)
    try:
        stores.ping()
    except RedisError as exc:
        if required:
            raise UserError(strings.REM_NO_AUDIT.format(url=url, why=exc)) from None
        return None, None
    return stores.audit(), stores.jobs()


def _print_plan(kind: str, target: SSHTarget, commands: list[str]) -> None:
    risk = catalog.get(kind).risk
    click.echo(strings.REM_PLAN_HEADER.format(kind=kind, host=target.name, address=target.address,
                                              risk=risk))
    for i, command in enumerate(commands, 1):
        click.echo(f"  {i}. {command}")


def _print_preview(kind: str, params: dict[str, str]) -> None:
    """What changes on the host beyond the commands (a drop-in's diff), before anyone says
    yes."""
    action = catalog.get(kind)
    preview = action.preview(action.validate(params))
    if preview:
        click.echo(preview, nl=False)


def _interrupted(jobs: JobStore | None, host: str) -> list[str]:
    """Interrupted extraction jobs on ``host`` (none without Redis, on a dry run)."""
    if jobs is None:
        return []
    from bot.jobs.status import interrupted_jobs

    return [s.job_id for s in interrupted_jobs(jobs, host)]


def _print_result(result: ActionResult, interrupted: list[str]) -> None:
    for rec in result.commands:
        if rec.skipped:
            state = f"skipped ({rec.skipped})"
        elif rec.timed_out:
            state = f"TIMED OUT after {rec.duration_s:.1f} s"
        else:
            state = f"exit {rec.exit_status} in {rec.duration_s:.2f} s"
        click.echo(f"  {rec.command}: {state}")
        if rec.reprobe:
            seen = {k: v for k, v in rec.reprobe.items() if k not in ("after_s",)}
            click.echo(f"    re-probe: {json.dumps(seen, sort_keys=True)}")
    click.echo(f"{result.outcome.value}: {result.summary}")
    for offer in offers(result, interrupted):
        pairs = " ".join(f"{k}={v}" for k, v in offer.params.items())
        label = catalog.get(offer.kind).offer_label(offer.reason)
        click.echo(strings.REM_OFFER.format(label=label, host=result.host, kind=offer.kind,
                                            params=pairs))


def _host_options(settings: Settings, target: SSHTarget, options: RemediationOptions,
                  jobs: JobStore | None) -> RemediationOptions:
    """What bounds disk.cleanup on that host, as in the flow (``hosts.act_options``): the
    inventory's ``allowed_path_prefixes`` and the output dirs of the host's unfinished
    jobs, read now (a job paused a second ago counts)."""
    host = settings.hosts.get(target.name)
    if host is not None:
        options = replace(options, allowed_prefixes=tuple(host.allowed_path_prefixes))
    if jobs is None:  # --dry-run without Redis: nothing runs
        return options
    dirs = unfinished_output_dirs(jobs, target.name)
    return replace(options, protected_dirs=tuple(sorted({*options.protected_dirs, *dirs})))


def _confirm(n: int, target: SSHTarget, actor: str) -> bool:
    """Ask once; end of input counts as no."""
    try:
        return bool(typer.confirm(strings.REM_CONFIRM.format(n=n, host=target.name, actor=actor)))
    except (typer.Abort, click.exceptions.Abort):
        return False


def _refused(settings: Settings, target: SSHTarget, kind: str, params: dict[str, str],
             actor: str, incident: str, exc: catalog.ActionRefused) -> None:
    audit, _ = _audit_log(settings, required=False)
    audit_refusal(audit, incident, actor, kind, params, target, exc.message, None)


def _reboot_seen(boot_id: str | None) -> Seen:
    """A new boot id is the reboot seen; none is a host that never answered again."""
    return Seen.FIXED if boot_id is not None else Seen.COULD_NOT_CHECK


def _rebooted(pool: Any, target: SSHTarget, result: ActionResult, before: str | None,
              wait_s: float, options: RemediationOptions, audit: AuditSink | None) -> ActionResult:
    """A sent reboot, waited for: a new boot id within ``wait_s`` is success ("back after
    N s with a new boot id"), none is failure ("did not come back within N s"); audited."""
    if not requested(result):
        return result
    seen = wait_back(pool, target, before, wait_s=wait_s, timeout_s=options.probe_timeout_s,
                     poll_s=max(options.poll_interval_s, 0.5))
    if seen.boot_id is not None:
        outcome, text = Outcome.SUCCEEDED, strings.REM_REBOOT_BACK.format(
            host=target.name, secs=seen.waited_s, boot=seen.boot_id)
    else:
        outcome, text = Outcome.FAILED, strings.REM_REBOOT_NOT_BACK.format(
            host=target.name, secs=seen.waited_s, boot=before or "unknown")
    evidence = {"boot_id_before": before, "boot_id_after": seen.boot_id,
                "waited_s": round(seen.waited_s, 1), "wait_s": wait_s}
    done = replace(result, outcome=outcome, summary=text,
                   verification=Verification(_reboot_seen(seen.boot_id), text, seen.waited_s,
                                             evidence=evidence))
    if audit is not None:
        audit.append(result.incident_id or "", result.approver, "host.reboot_settled",
                     {**evidence, "ok": done.ok, "text": text})
    return done


def run_act(target_spec: str, kind: str, pairs: list[str], *, dry_run: bool, yes: bool,
            as_json: bool, config: str | Path | None, ssh_key: str | None, known_hosts: str | None,
            incident: str | None, wait_s: float = 600.0) -> int:
    settings = load_settings(config)
    target = resolve_target(settings, target_spec, ssh_key, known_hosts)
    actor, incident_id = getpass.getuser(), incident or cli_incident_id()
    params = catalog.parse_params(pairs)
    try:
        commands = catalog.plan(kind, params, target)
    except catalog.ActionRefused as exc:
        _refused(settings, target, kind, params, actor, incident_id, exc)
        raise
    if not as_json:
        _print_plan(kind, target, commands)
        _print_preview(kind, params)
    audit, jobs = _audit_log(settings, required=not dry_run)
    if not dry_run and not yes and not _confirm(len(commands), target, actor):
        raise UserError(strings.REM_ABORTED, 130)
    from bot.ssh.pool import ParamikoPool

    options = _host_options(settings, target,
                            options_from_extra(settings.extra, jobs=jobs), jobs)
    pool = ParamikoPool(settings.ssh_defaults)
    try:
        reboot = catalog.get(kind).reboots and not dry_run
        before = read_boot_id(pool, target, options.probe_timeout_s) if reboot else None
        result = execute(pool, target, kind, params, approver=actor, evidence_hash=None,
                         audit=audit, dry_run=dry_run, incident_id=incident_id, options=options)
        if reboot:
            result = _rebooted(pool, target, result, before, wait_s, options, audit)
        interrupted = [] if dry_run else _interrupted(jobs, target.name)
        chained = chain_resumes(pool, target, result, interrupted, options=options, audit=audit)
    finally:
        pool.close()
    if as_json:
        click.echo(json.dumps({**result.to_dict(), "chained": [r.to_dict() for r in chained]},
                              sort_keys=True))
    else:
        _print_result(result, [] if chained else interrupted)
        for extra in chained:
            click.echo(f"{extra.outcome.value}: {extra.summary}")
    return 0 if result.ok and all(r.ok for r in chained) else 1


if TYPE_CHECKING:
    ActionKind = str
else:
    ActionKind = choices(action_kinds())
_Target = Annotated[str, typer.Argument(metavar="TARGET",
                                        help="inventory host name or user@host:port")]
_Kind = Annotated[ActionKind, typer.Argument(metavar="KIND", help="the action")]
_Params = Annotated[list[str] | None, typer.Argument(
    metavar="KEY=VALUE", help="the action's parameters, e.g. unit=vllm.service")]
_DryRun = Annotated[bool, typer.Option("--dry-run", help="show the commands, run nothing")]
_Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
_Json = Annotated[bool, typer.Option("--json", help="print the result as one JSON object")]
_Key = Annotated[str | None, typer.Option("--ssh-key", metavar="FILE",
                                          help="private key (overrides config)")]
_Known = Annotated[str | None, typer.Option("--known-hosts", metavar="FILE",
                                            help="known_hosts file")]
_Incident = Annotated[str | None, typer.Option("--incident", metavar="INC-N",
                                               help="audit under this incident")]
_WaitS = Annotated[float, typer.Option("--wait-s", min=0, max=3600, metavar="SECONDS",
                                       help="host.reboot: wait this long for a new boot id")]


def register(app: typer.Typer) -> None:
    @app.command(name="act")
    def _cmd(target: _Target, kind: _Kind, params: _Params = None, dry_run: _DryRun = False,
             yes: _Yes = False, as_json: _Json = False, config: ConfigOpt = None,
             ssh_key: _Key = None, known_hosts: _Known = None,
             incident: _Incident = None, wait_s: _WaitS = 600.0) -> None:
        """Run one catalog action on TARGET with capture, verify and audit."""
        code = run_act(target, kind, params or [], dry_run=dry_run, yes=yes, as_json=as_json,
                       config=config, ssh_key=ssh_key, known_hosts=known_hosts,
                       incident=incident, wait_s=wait_s)
        if code:
            raise typer.Exit(code)
