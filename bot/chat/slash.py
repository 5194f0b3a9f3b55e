"""The ``/ir`` slash command: pure parsing into typed commands, handlers injected.

Parsing never does I/O, so every bad input is answered with the usage line before any
work starts; the Slack app acks with that line at once. Arguments are validated here
(host names, playbook names, job ids, durations) because they later reach SSH and Redis.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bot.core import strings
from bot.core.errors import UserError
from bot.domain.durations import DurationError
from bot.domain.durations import parse_duration as duration_s
from bot.domain.lifecycle import MAX_SNOOZE_S
from bot.domain.validate import HOST_RE, INCIDENT_ID_RE, JOB_ID_RE
from storage.silences import MAX_DURATION_S as MAX_SILENCE_S

PLAYBOOK_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
KIND_RE = re.compile(r"^[a-z][a-z0-9_.-]{0,39}$")
MAX_STATS_S = 90 * 86400  # the audit keeps about this much history per incident
Guard = Callable[[str, str, str, Mapping[str, Any]], str | None]  # verb, user, incident, detail


class UsageError(ValueError):
    """Bad slash input; the message is the reply (a reason plus the usage line)."""


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Status:
    host: str | None = None  # one host's GPUs and disks; None: every host


@dataclass(frozen=True)
class Incidents:
    pass


@dataclass(frozen=True)
class Diag:
    host: str
    playbook: str | None = None


@dataclass(frozen=True)
class Jobs:
    pass


@dataclass(frozen=True)
class Job:
    job_id: str


@dataclass(frozen=True)
class Silence:
    host: str
    kind: str
    duration_s: int


@dataclass(frozen=True)
class DigestNow:
    pass


@dataclass(frozen=True)
class Decide:
    """``ack ID``, ``resolve ID``, ``snooze ID [DURATION]`` (default 30 min)."""

    verb: str
    incident_id: str
    duration_s: int = 0


@dataclass(frozen=True)
class Evidence:
    """``evidence ID``: the incident's raw probe output, posted in its thread."""

    incident_id: str


@dataclass(frozen=True)
class Drained:
    """``drained``: every draining or drained Slurm node, its reason, who and how long."""


@dataclass(frozen=True)
class Stats:
    """``stats [7d]``: time to acknowledge and to recover, per kind and host, and the share
    of incidents fixed with one click, over the incidents opened in the window."""

    window_s: int = 7 * 86400


SlashCommand = (Help | Status | Incidents | Diag | Jobs | Job | Silence | DigestNow | Decide
                | Evidence | Drained | Stats)
DEFAULT_SNOOZE_S = 1800


@dataclass(frozen=True)
class SlashReply:
    text: str
    in_channel: bool = False  # ephemeral unless the command starts an incident


class SlashHandlers(Protocol):
    """What the bot does for each command; the lead wires real ones, tests pass fakes."""

    def status(self, user: str, host: str | None = None) -> SlashReply: ...
    def incidents(self, user: str) -> SlashReply: ...
    def diag(self, user: str, host: str, playbook: str | None) -> SlashReply: ...
    def jobs(self, user: str) -> SlashReply: ...
    def job(self, user: str, job_id: str) -> SlashReply: ...
    def silence(self, user: str, host: str, kind: str, duration_s: int) -> SlashReply: ...
    def digest_now(self, user: str) -> SlashReply: ...
    def decide(self, user: str, verb: str, incident_id: str, duration_s: int, *,
               channel: str = "") -> SlashReply: ...
    def evidence(self, user: str, incident_id: str) -> SlashReply: ...
    def drained(self, user: str) -> SlashReply: ...
    def stats(self, user: str, window_s: int) -> SlashReply: ...


def usage(command: str = "/ir", reason: str = "") -> str:
    line = strings.SLASH_USAGE.format(cmd=command)
    return f"{reason}\n{line}" if reason else line


def parse(text: str, command: str = "/ir") -> SlashCommand:
    """Turn the text after ``/ir`` into a command; raise UsageError with the reply."""
    try:
        words = shlex.split(text or "")
    except ValueError as exc:
        raise UsageError(usage(command, f"Could not read that: {exc}.")) from None
    if not words:
        return Help()
    verb, args = words[0].lower(), words[1:]
    parser = _PARSERS.get(verb)
    if parser is None:
        raise UsageError(usage(command, f"Unknown subcommand `{_clip(verb)}`."))
    try:
        return parser(args)
    except ValueError as exc:
        raise UsageError(usage(command, f"`{verb}`: {exc}")) from None


def _no_args(make: Callable[[], SlashCommand]) -> Callable[[list[str]], SlashCommand]:
    def parse_it(args: list[str]) -> SlashCommand:
        if args:
            raise ValueError("takes no arguments.")
        return make()

    return parse_it


def _status(args: list[str]) -> SlashCommand:
    if len(args) > 1:
        raise ValueError("takes at most one HOST.")
    return Status(_check(args[0], HOST_RE, "host") if args else None)


def _diag(args: list[str]) -> SlashCommand:
    if not 1 <= len(args) <= 2:
        raise ValueError("needs HOST and optionally PLAYBOOK.")
    playbook = _check(args[1], PLAYBOOK_RE, "playbook") if len(args) == 2 else None
    return Diag(_check(args[0], HOST_RE, "host"), playbook)


def _job(args: list[str]) -> SlashCommand:
    if len(args) != 1:
        raise ValueError("needs one job ID.")
    return Job(_check(args[0], JOB_ID_RE, "job ID"))


def _silence(args: list[str]) -> SlashCommand:
    if len(args) != 3:
        raise ValueError("needs HOST KIND DURATION.")
    return Silence(_check(args[0], HOST_RE, "host"), _check(args[1], KIND_RE, "kind"),
                   parse_duration(args[2], MAX_SILENCE_S, strings.SLASH_SILENCE_TOO_LONG))


def _digest(args: list[str]) -> SlashCommand:
    if [a.lower() for a in args] != ["now"]:
        raise ValueError("only `digest now` is supported.")
    return DigestNow()


def _decide(verb: str) -> Callable[[list[str]], SlashCommand]:
    def parse_it(args: list[str]) -> SlashCommand:
        most = 2 if verb == "snooze" else 1
        if not 1 <= len(args) <= most:
            raise ValueError("needs an incident ID" + (" and optionally a DURATION." if most == 2
                                                       else "."))
        incident_id = _check(args[0], INCIDENT_ID_RE, "incident ID")
        if verb != "snooze":
            return Decide(verb, incident_id)
        return Decide(verb, incident_id,
                      parse_duration(args[1], MAX_SNOOZE_S, strings.SLASH_SNOOZE_TOO_LONG)
                      if len(args) == 2 else DEFAULT_SNOOZE_S)

    return parse_it


def _evidence(args: list[str]) -> SlashCommand:
    if len(args) != 1:
        raise ValueError("needs one incident ID.")
    return Evidence(_check(args[0], INCIDENT_ID_RE, "incident ID"))


def _stats(args: list[str]) -> SlashCommand:
    if len(args) > 1:
        raise ValueError("takes at most a period, e.g. `stats 7d`.")
    return Stats(parse_duration(args[0], MAX_STATS_S, strings.SLASH_STATS_TOO_LONG)
                 if args else Stats.window_s)


def parse_duration(text: str, most_s: int = MAX_SILENCE_S,
                   too_long: str = strings.SLASH_SILENCE_TOO_LONG) -> int:
    """``30m`` → 1800; 1 s to ``most_s``, the store's own limit (never accept what it refuses)."""
    try:
        seconds = round(duration_s(text))
    except DurationError as exc:
        if exc.not_positive:
            raise ValueError("duration must be at least 1s.") from None
        raise ValueError(f"duration `{_clip(text)}` must look like 30m, 2h or 1d.") from None
    if seconds <= 0:  # under half a second, rounded down
        raise ValueError("duration must be at least 1s.")
    if seconds > most_s:
        raise ValueError(too_long.format(days=most_s // 86400))
    return seconds


def _check(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.match(value):
        raise ValueError(f"`{_clip(value)}` is not a valid {what}.")
    return value


def _clip(text: str, n: int = 40) -> str:
    """Echo user input safely: short, no backticks or Slack control characters."""
    cleaned = "".join(c for c in text if c not in "`<>&*_~" and c.isprintable())
    return cleaned[:n] + ("…" if len(cleaned) > n else "")


_PARSERS: dict[str, Callable[[list[str]], SlashCommand]] = {
    "help": _no_args(Help),
    "status": _status,
    "incidents": _no_args(Incidents),
    "diag": _diag,
    "jobs": _no_args(Jobs),
    "job": _job,
    "silence": _silence,
    "digest": _digest,
    "ack": _decide("ack"),
    "resolve": _decide("resolve"),
    "snooze": _decide("snooze"),
    "evidence": _evidence,
    "drained": _no_args(Drained),
    "stats": _stats,
}


def known_verbs() -> tuple[str, ...]:
    """Every subcommand ``parse`` accepts (the docs and the manifest are checked against it)."""
    return tuple(_PARSERS)


# commands that change something (or run something on a host), under the desk's rule
_GUARDED: dict[type, str] = {Silence: "silence", Diag: "diag"}


def run(cmd: SlashCommand, handlers: SlashHandlers, user: str, command: str = "/ir",
        guard: Guard | None = None, channel: str = "") -> SlashReply:
    """Dispatch one command to its handler (help is answered here); ``silence`` and ``diag``
    (it runs commands on a host) only if ``guard``, the desk's one authority rule, allows.
    A handler's UserError is its reply. ``channel``: where it was typed (an incident verb's
    answer comes from the flow later, privately, there)."""
    verb = _GUARDED.get(type(cmd))
    if guard is not None and verb is not None:
        refused = guard(verb, user, "", {k: v for k, v in vars(cmd).items() if v is not None})
        if refused is not None:
            return SlashReply(refused)
    try:
        return _dispatch(cmd, handlers, user, command, channel)
    except UserError as exc:
        return SlashReply(exc.message)


def _dispatch(cmd: SlashCommand, handlers: SlashHandlers, user: str, command: str,
              channel: str = "") -> SlashReply:
    match cmd:
        case Help():
            return SlashReply(strings.SLASH_HELP.format(cmd=command))
        case Status(host=host):
            return handlers.status(user, host)
        case Incidents():
            return handlers.incidents(user)
        case Diag(host=host, playbook=playbook):
            return handlers.diag(user, host, playbook)
        case Jobs():
            return handlers.jobs(user)
        case Job(job_id=job_id):
            return handlers.job(user, job_id)
        case Silence(host=host, kind=kind, duration_s=duration_s):
            return handlers.silence(user, host, kind, duration_s)
        case DigestNow():
            return handlers.digest_now(user)
        case Decide(verb=verb, incident_id=incident_id, duration_s=duration_s):
            return handlers.decide(user, verb, incident_id, duration_s, channel=channel)
        case Evidence(incident_id=incident_id):
            return handlers.evidence(user, incident_id)
        case Drained():
            return handlers.drained(user)
        case Stats(window_s=window_s):
            return handlers.stats(user, window_s)
    raise AssertionError(f"unhandled slash command {cmd!r}")  # pragma: no cover


class Unavailable:
    """Handlers for a deployment that wires none yet: each says so, politely."""

    def _no(self, name: str) -> SlashReply:
        return SlashReply(strings.SLASH_UNAVAILABLE.format(name=name))
    def status(self, user: str, host: str | None = None) -> SlashReply:
        return self._no("status")
    def incidents(self, user: str) -> SlashReply:
        return self._no("incidents")
    def diag(self, user: str, host: str, playbook: str | None) -> SlashReply:
        return self._no("diag")
    def jobs(self, user: str) -> SlashReply:
        return self._no("jobs")
    def job(self, user: str, job_id: str) -> SlashReply:
        return self._no("job")
    def silence(self, user: str, host: str, kind: str, duration_s: int) -> SlashReply:
        return self._no("silence")
    def digest_now(self, user: str) -> SlashReply:
        return self._no("digest")
    def decide(self, user: str, verb: str, incident_id: str, duration_s: int, *,
               channel: str = "") -> SlashReply:
        return self._no(verb)
    def evidence(self, user: str, incident_id: str) -> SlashReply:
        return self._no("evidence")
    def drained(self, user: str) -> SlashReply:
        return self._no("drained")
    def stats(self, user: str, window_s: int) -> SlashReply:
        return self._no("stats")
