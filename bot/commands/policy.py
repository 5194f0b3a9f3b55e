"""`incident-bot policy check|replay|breaker`: what the fleet policies would do, before they
do it, and the fleet circuit breaker's state (``--reset`` closes it once a person looked).

``check`` needs only the config: every catalog action on every inventory host, the
policy it hits and that policy's mode. ``replay`` reads the audit stream (the same Redis
the service uses) for the actions people approved and started, and prints which ones
the current policies would have run without a click, and which would have hit a limit.
"""

from __future__ import annotations

import getpass
import time
from typing import TYPE_CHECKING, Annotated

import typer

from bot.commands.common import ConfigOpt, alert_kinds, choices, sub_app
from bot.commands.config import load_checked
from bot.config.policy import fleet_limits_from_settings, policies_from_settings
from bot.config.settings import Settings
from bot.core import strings
from bot.core.errors import UserError
from bot.domain.policy import (
    ActionRef,
    Policy,
    PolicyDecision,
    PolicyMode,
    host_count,
    period_words,
)
from bot.domain.policy_replay import CheckRow, PastAction, check_rows, replay
from bot.domain.windows import WindowError, parse_period

if TYPE_CHECKING:
    AlertKind = str
else:
    AlertKind = choices(alert_kinds())
STARTED = "action.started"
POLICY_ACTOR = "policy"


def describe(policy: Policy | None) -> str:
    """``auto, limit 3 hosts/hour, not during Mon-Fri ...`` for one policy."""
    if policy is None:
        return PolicyMode.APPROVE.value
    parts = [policy.mode.value]
    if policy.limit:
        parts.append(f"limit {policy.limit.max_hosts} hosts/{period_words(policy.limit.per_s)}")
    if policy.not_during:
        parts.append(f"not during {policy.not_during.text}")
    if policy.approvers:
        parts.append("approvers " + ", ".join(policy.approvers))
    if policy.two_person:
        parts.append("two-person")
    return ", ".join(parts)


def check_lines(rows: list[CheckRow]) -> list[str]:
    lines = [f"{'HOST':<16} {'ACTION':<28} {'POLICY':<28} MODE"]
    for row in rows:
        name = row.policy.name if row.policy else "(none)"
        when = f"  when {'; '.join(row.conditions)}" if row.conditions else ""
        lines.append(f"{row.host:<16} {row.action:<28} {name:<28} {describe(row.policy)}{when}")
    return lines


def _pairs(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"invalid --param {pair!r}: expected key=value", 2)
        out[key] = value
    return out


def past_actions(settings: Settings, since_s: float, now: float) -> list[PastAction]:
    """People's started actions from the audit stream, with their incident's kind."""
    from storage.connection import StorageError
    from storage.stores import open_stores

    stores = open_stores(settings.redis_url)
    try:
        entries = [e for e in stores.audit().between(now - since_s, now)
                   if e.action == STARTED and e.actor != POLICY_ACTOR]
        store, kinds = stores.incidents(), {}
        for inc in {e.incident_id for e in entries}:
            found = store.get(inc)
            kinds[inc] = found.kind if found else ""
    except StorageError as exc:
        raise UserError(f"cannot read the audit stream at {settings.redis_url}: {exc}") from None
    finally:
        stores.close()
    return [PastAction(e.ts, e.incident_id, str(e.detail.get("host", "")),
                       ActionRef(str(e.detail.get("kind", "")),
                                 {str(k): str(v) for k, v in
                                  dict(e.detail.get("params") or {}).items()}),
                       kinds.get(e.incident_id, ""), e.actor) for e in entries]


def breaker(settings: Settings, reset: bool) -> str:
    """The breaker's state, or closing it (audited as ``cli:<login>``)."""
    from storage.connection import StorageError
    from storage.stores import open_stores

    limits = fleet_limits_from_settings(settings)
    stores = open_stores(settings.redis_url)
    counter = stores.policy_limits(fleet_cap=limits.cap(len(settings.hosts)),
                                   fleet_window_s=limits.per_s)
    try:
        if reset:
            actor = f"cli:{getpass.getuser()}"
            if counter.reset(actor):
                return strings.POLICY_BREAKER_RESET_CLI.format(actor=actor)
        state = counter.breaker()
    except StorageError as exc:
        raise UserError(f"cannot read the breaker at {settings.redis_url}: {exc}") from None
    finally:
        stores.close()
    if not state.open:
        return strings.POLICY_BREAKER_CLOSED_CLI.format(cap=state.cap)
    return strings.POLICY_BREAKER_OPEN_CLI.format(
        n_hosts=host_count(len(state.hosts)), period=period_words(limits.per_s),
        hosts=", ".join(sorted(state.hosts)) or "-", cap=state.cap)


def replay_line(item: PastAction, d: PolicyDecision) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(item.ts))
    what = {PolicyMode.AUTO: "would have run automatically",
            PolicyMode.SHADOW: "shadow: would have been posted as a suggestion",
            PolicyMode.APPROVE: "would still ask"}[d.mode]
    why = f" ({d.reason})" if d.mode is PolicyMode.APPROVE and d.fell_back else ""
    return (f"{stamp}Z {item.incident_id:<9} {item.host:<14} {item.action.kind:<24} "
            f"{d.policy_name or '(none)':<26} {what}{why}")


def replay_summary(results: list[tuple[PastAction, PolicyDecision]]) -> str:
    auto = sum(1 for _, d in results if d.mode is PolicyMode.AUTO)
    limited = sum(1 for _, d in results if d.fell_back and d.mode is PolicyMode.APPROVE)
    return (f"{len(results)} approved action(s): {auto} would have run automatically, "
            f"{limited} would have hit a limit, window or the breaker")


def register(app: typer.Typer) -> None:
    policy = sub_app("What the fleet policies would do: check, replay, breaker.")

    @policy.command("check")
    def check(config: ConfigOpt,
              param: Annotated[list[str] | None, typer.Option(
                  "--param", metavar="KEY=VALUE",
                  help="an action parameter (repeatable)")] = None,
              kind: Annotated[AlertKind | None, typer.Option(
                  "--kind", help="the incident kind (default: any)")] = None) -> None:
        """Which policy each catalog action on each inventory host would hit, and its mode."""
        from bot.remediation.catalog import CATALOG

        settings = load_checked(config, alerts_only=True)
        rows = check_rows(policies_from_settings(settings), sorted(settings.hosts),
                          sorted(CATALOG), _pairs(param or []), kind)
        typer.echo("\n".join(check_lines(rows)))

    @policy.command("replay")
    def replay_(config: ConfigOpt,
                since: Annotated[str, typer.Option("--since", help="how far back, e.g. 7d")]
                = "7d") -> None:
        """Past approved actions the current policies would have run without a click."""
        try:
            since_s = parse_period(since)
        except WindowError as exc:
            raise UserError(f"invalid --since: {exc}", 2) from None
        settings = load_checked(config, alerts_only=True)
        past = past_actions(settings, since_s, time.time())
        results = replay(policies_from_settings(settings), past,
                         fleet_limits_from_settings(settings), len(settings.hosts))
        for item, decision in results:
            typer.echo(replay_line(item, decision))
        typer.echo(replay_summary(results))

    @policy.command("breaker")
    def breaker_(config: ConfigOpt,
                 reset: Annotated[bool, typer.Option(
                     "--reset", help="close an open breaker (audited)")] = False) -> None:
        """The fleet circuit breaker: open or closed, and the hosts it counted."""
        typer.echo(breaker(load_checked(config, alerts_only=True), reset))

    app.add_typer(policy, name="policy")
