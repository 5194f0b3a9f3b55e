"""`/ir` parsing is pure: typed commands, or a usage error naming what was wrong."""

from __future__ import annotations

import pytest

from bot.chat import slash
from bot.chat.slash import (
    Diag,
    DigestNow,
    Drained,
    Evidence,
    Help,
    Incidents,
    Job,
    Jobs,
    Silence,
    SlashReply,
    Stats,
    Status,
    UsageError,
    parse,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Help()),
        ("help", Help()),
        ("HELP", Help()),
        ("status", Status()),
        ("status gpu-01", Status("gpu-01")),
        ("incidents", Incidents()),
        ("diag gpu-01", Diag("gpu-01")),
        ("diag gpu-01 vram_idle", Diag("gpu-01", "vram_idle")),
        ("  diag   gpu-01.lab  ", Diag("gpu-01.lab")),
        ("jobs", Jobs()),
        ("job ex-0123456789ab", Job("ex-0123456789ab")),
        ("silence gpu-01 vram_idle 30m", Silence("gpu-01", "vram_idle", 1800)),
        ("silence gpu-01 disk_full 2h", Silence("gpu-01", "disk_full", 7200)),
        ("digest now", DigestNow()),
        ("evidence INC-7", Evidence("INC-7")),
        ("drained", Drained()),
        ("stats", Stats(7 * 86400)),
        ("stats 30d", Stats(30 * 86400)),
    ],
)
def test_parse_valid(text: str, expected: object) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("frobnicate", "Unknown subcommand `frobnicate`"),
        ("diag", "needs HOST"),
        ("diag a b c", "needs HOST"),
        ("diag 'gpu 01'", "not a valid host"),
        ("diag gpu-01;rm", "not a valid host"),
        ("diag gpu-01 Bad-Playbook", "not a valid playbook"),
        ("diag $(reboot)", "not a valid host"),
        ("status gpu-01 gpu-02", "at most one HOST"),
        ("status ../etc", "not a valid host"),
        ("job", "needs one job ID"),
        ("job ../../etc", "not a valid job ID"),
        ("silence gpu-01 vram_idle", "needs HOST KIND DURATION"),
        ("silence gpu-01 vram_idle forever", "must look like 30m"),
        ("silence gpu-01 vram_idle 0s", "at least 1s"),
        ("silence gpu-01 vram_idle 31d", "at most 30 days"),
        ("snooze INC-1 8d", "at most 7 days"),  # the incident store's cap, not the silence's
        ("digest later", "only `digest now`"),
        ('diag "unterminated', "Could not read that"),
        ("evidence", "needs one incident ID"),
        ("evidence INC-1 INC-2", "needs one incident ID"),
        ("evidence ../INC-1", "not a valid incident ID"),
        ("stats 91d", "at most 90 days"),
        ("stats 7d gpu-01", "at most a period"),
    ],
)
def test_parse_invalid_gives_reason_and_usage(text: str, reason: str) -> None:
    with pytest.raises(UsageError) as err:
        parse(text, "/ir")
    message = str(err.value)
    assert reason in message
    assert "Usage: /ir help | status" in message


def test_usage_echo_is_sanitised() -> None:
    with pytest.raises(UsageError) as err:
        parse("<!channel>*boom*`x`" + "a" * 100)
    message = str(err.value)
    assert "<!channel>" not in message and "`x`" not in message
    assert "…" in message  # long input is clipped


def test_command_name_is_configurable() -> None:
    with pytest.raises(UsageError, match="Usage: /incident help"):
        parse("nope", "/incident")


def test_parse_duration_units() -> None:
    assert [parse_duration(t) for t in ("45s", "10m", "3h", "1d")] == [45, 600, 10800, 86400]


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def _r(self, *args: object) -> SlashReply:
        self.calls.append(args)
        return SlashReply(f"ok {args[0]}", in_channel=args[0] == "diag")

    def status(self, user: str, host: str | None = None) -> SlashReply:
        return self._r("status", user, *([host] if host else []))

    def incidents(self, user: str) -> SlashReply:
        return self._r("incidents", user)

    def diag(self, user: str, host: str, playbook: str | None) -> SlashReply:
        return self._r("diag", user, host, playbook)

    def jobs(self, user: str) -> SlashReply:
        return self._r("jobs", user)

    def job(self, user: str, job_id: str) -> SlashReply:
        return self._r("job", user, job_id)

    def silence(self, user: str, host: str, kind: str, duration_s: int) -> SlashReply:
        return self._r("silence", user, host, kind, duration_s)

    def digest_now(self, user: str) -> SlashReply:
        return self._r("digest", user)

    def decide(self, user: str, verb: str, incident_id: str, duration_s: int, *,
               channel: str = "") -> SlashReply:
        return self._r(verb, user, incident_id, duration_s)

    def evidence(self, user: str, incident_id: str) -> SlashReply:
        return self._r("evidence", user, incident_id)

    def drained(self, user: str) -> SlashReply:
        return self._r("drained", user)


def test_run_dispatches_each_command_to_its_handler() -> None:
    rec = Recorder()
    for text in (
        "status",
        "status h1",
        "incidents",
        "diag h1 vram_idle",
        "jobs",
        "job ex-0123456789ab",
        "silence h1 k 1h",
        "digest now",
        "evidence INC-3",
        "drained",
    ):
        slash.run(parse(text), rec, "U1")
    assert rec.calls == [
        ("status", "U1"),
        ("status", "U1", "h1"),
        ("incidents", "U1"),
        ("diag", "U1", "h1", "vram_idle"),
        ("jobs", "U1"),
        ("job", "U1", "ex-0123456789ab"),
        ("silence", "U1", "h1", "k", 3600),
        ("digest", "U1"),
        ("evidence", "U1", "INC-3"),
        ("drained", "U1"),
    ]
    assert slash.run(parse("diag h1"), rec, "U1").in_channel  # starting an incident is public
    help_reply = slash.run(parse("help"), rec, "U1", "/ir")
    assert "/ir diag HOST [PLAYBOOK]" in help_reply.text and not help_reply.in_channel


def test_unavailable_handlers_say_so() -> None:
    reply = slash.run(parse("jobs"), slash.Unavailable(), "U1")
    assert "not available" in reply.text and not reply.in_channel


def test_manifest_matches_the_app() -> None:
    """The manifest a workspace admin imports points at our route and command, with our scopes."""
    from pathlib import Path

    import yaml

    from bot.config.settings import Settings

    root = Path(__file__).resolve().parents[2]
    manifest = yaml.safe_load((root / "deploy" / "slack-app-manifest.yml").read_text())
    (command,) = manifest["features"]["slash_commands"]
    assert command["command"] == Settings().slack.slash_command
    assert command["url"].endswith("/slack/events")
    assert manifest["settings"]["interactivity"]["request_url"].endswith("/slack/events")
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {
        "chat:write",
        "commands",
        "files:write",
        "usergroups:read",
        "channels:history",
    } <= scopes
    assert "socket_mode_enabled" in manifest["settings"]
