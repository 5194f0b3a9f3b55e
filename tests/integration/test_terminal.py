"""The terminal backend: messages print, buttons become commands, and typed commands drive
the same approval desk (real Redis) as Slack clicks."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from redis import Redis
from rich.console import Console

from bot.chat.base import ChatMessage, Ephemeral, MessageRef
from bot.chat.interactions import ApprovalDesk
from bot.chat.render import IncidentHeader, render_incident, thread_evidence
from bot.chat.terminal import (
    TerminalBackend,
    TerminalCommand,
    TerminalInputError,
    handle_line,
    parse_command,
)
from bot.domain.approval import (
    Approval,
    ApprovalAction,
    ApprovalPolicy,
    ApprovalStatus,
    ClaimOutcome,
)
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.domain.incident_record import ActionPlan
from storage.approvals import ApprovalStore
from storage.events import IncidentEvents
from tests.helpers.clicks import queued

ACTION = ProposedAction("a1", "systemd.stop_disable", {"unit": "vllm.service"}, "frees the GPUs")
GPUS = [
    {
        "index": i,
        "memory_used_mib": 77_619,
        "memory_total_mib": 81_559,
        "utilization_pct": 0,
        "holder": [{"pid": 440, "unit": "[bold red]vllm[/]"}],
    }
    for i in range(2)
]
DIAG = Diagnosis(
    "gpu-01",
    "vram_idle",
    DiagnosisStatus.OK,
    0.4,
    (
        Finding(
            "gpu.idle_vram_held", Severity.CRITICAL, "GPUs held <!channel>", evidence={"gpus": GPUS}
        ),
    ),
    (ACTION,),
)
NOW = 1_764_600_000.0
INCIDENT = IncidentHeader("42", "gpu-01", "vram_idle", "critical", "awaiting_approval",
                          first_seen=NOW - 300)
POLICY = ApprovalPolicy(approvers=frozenset({"demo-user", "UALICE"}))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("approve 3", TerminalCommand("approve", 3)),
        ("APPROVE 3", TerminalCommand("approve", 3)),
        ('deny 3 "not now, it is 49% done"', TerminalCommand("deny", 3, "not now, it is 49% done")),
        ("deny 3 not now please", TerminalCommand("deny", 3, "not now please")),
        ("revert 4", TerminalCommand("revert", 4)),
        ("help", TerminalCommand("help")),
        ("quit", TerminalCommand("quit")),
        ("ack INC-7", TerminalCommand("ack", incident_id="INC-7")),
        ("resolve INC-7", TerminalCommand("resolve", incident_id="INC-7")),
        ("retry INC-7", TerminalCommand("retry", incident_id="INC-7")),
        ("escalate INC-7", TerminalCommand("escalate", incident_id="INC-7")),
        ("snooze INC-7", TerminalCommand("snooze", incident_id="INC-7", duration_s=1800)),
        ("snooze INC-7 2h", TerminalCommand("snooze", incident_id="INC-7", duration_s=7200)),
    ],
)
def test_parse_command(line: str, expected: TerminalCommand) -> None:
    assert parse_command(line) == expected


@pytest.mark.parametrize(
    "line", ["", "approve", "approve x", "approve 3 now", "deny 3", 'deny 3 "ok', "rm -rf 3",
             "ack", "ack ../INC-7", "resolve INC-7 now", "snooze INC-7 forever", "snooze a 1h 2"]
)
def test_parse_command_rejects_bad_input(line: str) -> None:
    with pytest.raises(TerminalInputError) as err:
        parse_command(line)
    assert err.value.exit_code == 2 and "approve N" in err.value.message


def make_rig(
    redis: Redis,
) -> tuple[TerminalBackend, io.StringIO, ApprovalDesk, list[tuple[str, ...]], Approval]:
    out = io.StringIO()
    backend = TerminalBackend(Console(file=out, width=140, color_system=None))
    events: list[tuple[str, ...]] = []
    store = ApprovalStore(redis)
    approval = store.create(
        "42",
        ApprovalAction.of(ACTION, ()),
        evidence_hash="e",
        requested_by="alertmanager",
        now=time.time(),
        policy=POLICY,
    )
    desk = ApprovalDesk(
        store,
        POLICY,
        IncidentEvents(redis),  # the desk queues its decisions here, for the flow
        audit=lambda *e: events.append(("audit", *e)),
    )
    msg = render_incident(
        INCIDENT, DIAG, [ActionPlan(ACTION, ("systemctl stop vllm.service",), approval.id)],
        now=NOW,
    )
    backend.post("terminal", msg)
    return backend, out, desk, events, approval


def test_message_prints_with_commands_and_literal_host_text(redis: Redis) -> None:
    backend, out, _, _, approval = make_rig(redis)
    text = out.getvalue()
    assert "gpu-01: 2 GPUs × 75.8 GiB held at 0%" in text  # no incident age in the headline
    assert "? Awaiting approval · incident 42 · opened 5 min ago" in text
    assert "Proposed: Stop vllm.service and keep it from starting at boot" in text
    assert '[1] approve 1  |  deny 1 "reason"  (runs commands on the host)' in text
    assert "ack 42  |  snooze 42 30m|2h|1d  |  resolve 42" in text
    assert ":raising_hand:" not in text and "&lt;" not in text
    assert backend.number_of(approval.id) == 1 and backend.number_of("42") is None
    thread = TerminalBackend(Console(file=io.StringIO(), width=160, color_system=None))
    table, = thread_evidence(DIAG)
    thread.post("terminal", ChatMessage(text=table.text, sections=(table,)))
    shown = thread.console.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold red]vllm[/]" in shown, "host text is printed literally, never as rich markup"
    assert "75.8 / 79.6 GiB" in shown


def test_approve_by_number_runs_once(redis: Redis) -> None:
    backend, out, desk, _, approval = make_rig(redis)
    decision = handle_line(backend, desk, "demo-user", "approve 1")
    assert decision is not None and decision.outcome is ClaimOutcome.CLAIMED
    again = handle_line(backend, desk, "UALICE", "approve 1")
    assert again is not None and again.outcome is ClaimOutcome.ALREADY_DONE
    assert queued(redis) == [("click.approved", approval.id, "demo-user")]
    assert "(only demo-user sees this) Approved by demo-user" in out.getvalue()


def test_deny_with_reason_and_unauthorised_user(redis: Redis) -> None:
    backend, out, desk, events, approval = make_rig(redis)
    refused = handle_line(backend, desk, "mallory", 'deny 1 "because"')
    assert refused is not None and refused.outcome is ClaimOutcome.UNAUTHORISED
    detail = {"approval_id": approval.id, "kind": "systemd.stop_disable", "evidence_hash": "e"}
    assert ("audit", "42", "mallory", "approval.refused", detail) in events
    denied = handle_line(backend, desk, "UALICE", 'deny 1 "the run is 49% done"')
    assert denied is not None and denied.outcome is ClaimOutcome.DENIED and denied.acted
    assert queued(redis) == [("click.denied", approval.id, "UALICE")]
    assert IncidentEvents(redis).read()[-1][1]["reason"] == "the run is 49% done"
    stored = desk.store.get(approval.id)
    assert stored is not None and stored.status is ApprovalStatus.DENIED
    # the action in words, never its kind string (issue 35)
    assert ("(only @UALICE sees this) Denied: stop vllm.service and keep it from starting at "
            "boot. Reason recorded: the run is 49% done") in out.getvalue()
    assert "systemd.stop_disable" not in out.getvalue().split("Denied")[-1]


def test_incident_commands_go_through_the_desk(redis: Redis) -> None:
    backend, out, desk, events, _ = make_rig(redis)
    """Allowed: queued as click events for the flow, which answers once it applied them
    (its words: tests/integration/test_messages_outcome.py); refused: answered here."""
    before = out.getvalue()
    assert handle_line(backend, desk, "demo-user", "snooze 42 2h") is None
    assert handle_line(backend, desk, "UALICE", "ack 42") is None
    handle_line(backend, desk, "mallory", "resolve 42")
    asked = [(e["type"], e["incident_id"], e["user"], e["duration_s"], e["channel"])
             for _, e in IncidentEvents(redis).read()]
    assert asked == [("click.snooze", "42", "demo-user", "7200", "terminal"),
                     ("click.ack", "42", "UALICE", "0", "terminal")]
    assert ("audit", "42", "mallory", "incident.refused", {"verb": "resolve"}) in events
    said = out.getvalue()[len(before):]
    assert "(only mallory sees this) You are not allowed to resolve" in " ".join(said.split())
    assert "demo-user sees this" not in said and "UALICE sees this" not in said


def test_unknown_number_or_verb(redis: Redis) -> None:
    backend, _, desk, _, _ = make_rig(redis)
    with pytest.raises(TerminalInputError, match=r"No button numbered 7 \(known: 1\)"):
        handle_line(backend, desk, "demo-user", "approve 7")
    with pytest.raises(TerminalInputError, match="has no `revert` button"):
        backend.read_command("revert 1")
    assert handle_line(backend, desk, "demo-user", "help") is None


def test_edits_ephemerals_and_uploads(redis: Redis, tmp_path: Path) -> None:
    out = io.StringIO()
    backend = TerminalBackend(
        Console(file=out, width=120, color_system=None), upload_dir=tmp_path / "up"
    )
    ref = backend.post("terminal", render_incident(INCIDENT, DIAG))
    backend.update(
        ref,
        render_incident(IncidentHeader("42", "gpu-01", "vram_idle", "critical", "verified"), DIAG),
    )
    backend.ephemeral(Ephemeral(user="UALICE", text="*hi* <@UBOB>"))
    chart = tmp_path / "digest.png"
    chart.write_bytes(b"png")
    backend.upload(MessageRef("terminal", ref.ts), chart, "GPU digest")
    text = out.getvalue()
    assert "message #1 (edited)" in text and "✓ Verified · incident 42" in text
    assert "(only @UALICE sees this) *hi* @UBOB" in text
    assert (tmp_path / "up" / "digest.png").read_bytes() == b"png" and "GPU digest" in text
    assert [r.ts for r, _ in backend.history] == ["1", "1"]


def test_backend_is_chosen_by_name() -> None:
    from bot.chat.backends import make_backend
    from bot.chat.slack import SlackBackend
    from bot.config.settings import Settings
    from bot.core.errors import ConfigError

    assert isinstance(make_backend(Settings(chat_backend="terminal")), TerminalBackend)
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        make_backend(Settings(chat_backend="slack"))
    with pytest.raises(ConfigError, match="unknown backend 'irc'"):
        make_backend(Settings(chat_backend="irc"))
    slack = make_backend(
        Settings.model_validate({"chat_backend": "slack", "slack_bot_token": "xoxb-1"})
    )
    assert isinstance(slack, SlackBackend) and slack.client.base_url == "https://slack.com/api/"
    slack.close()
