"""`incident-bot act` as a person runs it: a sim host over sshd, the real Redis.

The story's run goes through a real `incident-bot` process; the other cases call the
same entry point (``bot.cli.main``) in-process to spare a few seconds of start-up each.
"""

from __future__ import annotations

import getpass
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from redis import Redis

from bot.core.procs import free_port
from bot.sim.sshd import SimHost
from storage.audit import AuditLog
from tests.fixtures.remediation import tool_calls
from tests.fixtures.sim import one_host_config

UNIT = "vllm-kimi-k25-int4.service"
ActHere = Callable[..., tuple[int, str, str]]


def act(*args: str, redis_url: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url}
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "act", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture
def act_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> ActHere:
    """The same CLI entry point in this process: (exit status, stdout, stderr)."""
    from bot.cli import main

    def run(*args: str, redis_url: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setenv("REDIS_URL", redis_url)
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["act", *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def _direct(host: SimHost) -> list[str]:
    return [
        host.target,
        "--ssh-key",
        str(host.key_path),
        "--known-hosts",
        str(host.known_hosts_path),
    ]


@pytest.fixture
def config(tmp_path: Path, seed_sim: SimHost) -> Path:
    return one_host_config(tmp_path / "bot.yaml", seed_sim)


def test_act_stops_and_disables_verifies_audits_and_offers_revert(
    seed_sim: SimHost, config: Path, redis_url: str, redis: Redis
) -> None:
    proc = act(
        "gpu-01",
        "systemd.stop_disable",
        f"unit={UNIT}",
        "--yes",
        "--config",
        str(config),
        redis_url=redis_url,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"1. systemctl stop {UNIT}" in proc.stdout
    assert f"succeeded: stopped and disabled {UNIT}; 8/8 GPUs free" in proc.stdout
    assert (
        f"Revert: incident-bot act gpu-01 systemd.revert unit={UNIT} "
        "unit_file_state=enabled active_state=active"
    ) in proc.stdout
    assert tool_calls(seed_sim, "systemctl", "stop") == [["stop", UNIT]]
    entries = AuditLog(redis).recent()
    assert [e.action for e in entries] == ["action.started", "action.succeeded"]
    assert {e.actor for e in entries} == {getpass.getuser()}
    assert entries[0].incident_id.startswith("cli-")


def test_revert_from_the_printed_command_restores_the_unit(
    seed_sim: SimHost, config: Path, redis_url: str, act_here
) -> None:
    code, _, err = act_here(
        "gpu-01",
        "systemd.stop_disable",
        f"unit={UNIT}",
        "-y",
        "-c",
        str(config),
        redis_url=redis_url,
    )
    assert code == 0, err
    code, out, err = act_here(
        "gpu-01",
        "systemd.revert",
        f"unit={UNIT}",
        "unit_file_state=enabled",
        "active_state=active",
        "-y",
        "-c",
        str(config),
        "--json",
        redis_url=redis_url,
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["outcome"] == "succeeded" and result["kind"] == "systemd.revert"
    state = seed_sim.state()["units"][UNIT]
    assert (state["active_state"], state["unit_file_state"]) == ("active", "enabled")


def test_dry_run_prints_the_commands_and_runs_nothing_even_without_redis(
    seed_sim: SimHost, act_here
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    code, out, err = act_here(
        *_direct(seed_sim), "systemd.stop_disable", f"unit={UNIT}", "--dry-run", redis_url=dead
    )
    assert code == 0, err
    assert f"1. systemctl stop {UNIT}\n  2. systemctl disable {UNIT}" in out
    assert "dry_run: dry run: would run 2 command(s)" in out
    assert seed_sim.command_log() == []


@pytest.mark.parametrize("answer", ["n\n", ""])
def test_without_yes_it_asks_and_no_means_nothing_runs(
    seed_sim: SimHost,
    redis_url: str,
    redis: Redis,
    act_here: ActHere,
    answer: str,
) -> None:
    code, out, err = act_here(
        *_direct(seed_sim),
        "systemd.stop_disable",
        f"unit={UNIT}",
        redis_url=redis_url,
        stdin=answer,
    )
    assert code == 130 and err == "error: aborted: nothing was run\n"
    assert "Run 2 command(s) on 127.0.0.1" in out
    assert seed_sim.command_log() == []
    assert AuditLog(redis).recent() == []


def test_hostile_parameter_is_one_line_exit_2_and_audited(
    seed_sim: SimHost, redis_url: str, redis: Redis
) -> None:
    proc = act(
        *_direct(seed_sim),
        "systemd.stop_disable",
        "unit=$(touch /tmp/x).service",
        "--yes",
        redis_url=redis_url,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: refused systemd.stop_disable: invalid unit")
    assert proc.stderr.count("\n") == 1
    assert seed_sim.command_log() == []
    assert [e.action for e in AuditLog(redis).recent()] == ["action.refused"]


def test_a_real_run_refuses_to_start_without_an_audit_trail(
    seed_sim: SimHost, act_here: ActHere
) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    code, _, err = act_here(
        *_direct(seed_sim), "systemd.stop_disable", f"unit={UNIT}", "--yes", redis_url=dead
    )
    assert code == 1
    assert "cannot act without an audit trail" in err
    assert seed_sim.command_log() == []


def test_unknown_kind_and_bad_target_exit_2(redis_url: str, act_here: ActHere) -> None:
    code, _, err = act_here("root@127.0.0.1:22", "shell.run", "cmd=id", redis_url=redis_url)
    assert code == 2 and "'shell.run' is not one of 'disk.cleanup'" in err  # a listed choice
    code, _, err = act_here(
        "no such host", "systemd.stop_disable", f"unit={UNIT}", redis_url=redis_url
    )
    assert code == 2 and "neither a host in the config nor user@host:port" in err


def test_the_issue_17_terminate_is_refused_with_the_stop_disable_command_to_run(
    sim_factory: Callable[..., SimHost], redis_url: str, act_here: ActHere
) -> None:
    host = sim_factory("respawn_10s")
    code, out, _ = act_here(*_direct(host), "process.terminate", "pid=440", "--yes",
                            redis_url=redis_url)
    assert code == 1
    assert "refused: refused to end PID 440" in out and "8/8 GPUs free" not in out
    assert f"incident-bot act 127.0.0.1 systemd.stop_disable unit={UNIT}" in out
    assert tool_calls(host, "kill") == []


def test_dropin_dry_run_shows_the_file_as_a_diff(
    seed_sim: SimHost, redis_url: str, act_here: ActHere
) -> None:
    code, out, _ = act_here(*_direct(seed_sim), "systemd.dropin", f"unit={UNIT}",
                            "timeout_stop_s=20", "--dry-run", redis_url=redis_url)
    assert code == 0
    assert f"+++ /etc/systemd/system/{UNIT}.d/50-incident-bot.conf" in out
    assert "+Restart=on-failure\n+TimeoutStopSec=20\n" in out
    assert "+ExecStartPre=/usr/bin/test ! -e /run/incident-bot/gpu-reservation" in out
    assert seed_sim.command_log() == []
