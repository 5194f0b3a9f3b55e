"""Injection: the hostile scenario's names never reach a shell; the canary never appears.

Every unit name and process text the host reports is fed back as a parameter, the way
a naive bot would. Validation refuses each one (and audits the attempt) before any SSH
session; valid-but-weird names travel as one quoted argument.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bot.remediation import ActionRefused, Outcome, RemediationOptions, execute
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog
from tests.fixtures.remediation import session_commands, tool_calls
from tests.fixtures.sim import SimFactory

WEIRD = "weird:name@inst\\x2d1.service"  # valid systemd name with an escape, ':' and '@'


@pytest.fixture
def hostile(sim_factory: SimFactory) -> SimHost:
    return sim_factory(
        "hostile",
        overrides={
            "units": {
                WEIRD: {"active_state": "active", "unit_file_state": "enabled", "restart": "no"}
            }
        },
    )


def _hostile_texts(host: SimHost) -> list[str]:
    state = host.state()
    texts = [name for name in state["units"] if "touch" in name]
    for proc in state["processes"]:
        texts += [proc["args"], proc.get("comm") or "", proc["owner"]["name"]]
    texts = [t for t in texts if "touch" in t]
    assert len(texts) >= 5  # the scenario really is hostile
    return texts


def _canary(host: SimHost) -> Path:
    return Path(host.state()["canary"])


def test_hostile_names_and_pids_are_refused_before_any_session(
    hostile: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions, audit_log: AuditLog
) -> None:
    texts = _hostile_texts(hostile)
    attempts = [
        (kind, {"unit": t}) for t in texts for kind in ("systemd.stop_disable", "systemd.mask")
    ]
    attempts += [("process.terminate", {"pid": t}) for t in (*texts, "666; touch x", "666\n667")]
    attempts += [
        (
            "systemd.revert",
            {"unit": texts[0], "unit_file_state": "enabled", "active_state": "active"},
        )
    ]
    for kind, params in attempts:
        with pytest.raises(ActionRefused):
            execute(
                rem_pool,
                hostile.ssh_target(),
                kind,
                params,
                approver="U0AAAAAAA",
                evidence_hash=None,
                audit=audit_log,
                options=fast_options,
                incident_id="INC-66",
            )
    assert hostile.command_log() == []  # refused before any SSH session
    refused = audit_log.timeline("INC-66")
    assert len(refused) == len(attempts)
    assert {e.action for e in refused} == {"action.refused"}
    assert all("invalid" in e.detail["reason"] for e in refused)
    assert not _canary(hostile).exists()


def test_terminating_the_hostile_holder_by_pid_never_runs_its_text(
    hostile: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    result = execute(
        rem_pool,
        hostile.ssh_target(),
        "process.terminate",
        {"pid": "666", "override": "yes"},  # its unit restarts it: refused without
        approver="U0AAAAAAA",
        evidence_hash=None,
        audit=None,
        options=fast_options,
    )
    assert result.outcome in (Outcome.SUCCEEDED, Outcome.RESPAWNED), result.summary
    assert tool_calls(hostile, "kill") == [["-TERM", "666"]]
    sent = session_commands(hostile)
    assert sent and not any("touch" in c or "$(" in c or "`" in c for c in sent)
    assert not _canary(hostile).exists()


def test_valid_but_weird_unit_names_are_quoted_as_one_argument(
    hostile: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    result = execute(
        rem_pool,
        hostile.ssh_target(),
        "systemd.stop_disable",
        {"unit": WEIRD},
        approver="U0AAAAAAA",
        evidence_hash=None,
        audit=None,
        options=fast_options,
    )
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert tool_calls(hostile, "systemctl", "stop") == [["stop", WEIRD]]
    assert tool_calls(hostile, "systemctl", "disable") == [["disable", WEIRD]]
    assert result.commands[0].command == f"systemctl stop '{WEIRD}'"
    wire = shlex.quote(result.commands[0].command)  # as the pool's deadline wrapper sends it
    assert any(wire in c for c in session_commands(hostile))
    state = hostile.state()["units"][WEIRD]
    assert (state["active_state"], state["unit_file_state"]) == ("inactive", "disabled")
    assert not _canary(hostile).exists()
