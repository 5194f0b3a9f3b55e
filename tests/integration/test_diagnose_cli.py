"""`incident-bot diagnose` as a user runs it: a real process against a simulated host."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.sim.sshd import SimHost, start_sim


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHost]:
    host = start_sim("seed", workdir=tmp_path_factory.mktemp("cli-seed"))
    yield host
    host.stop()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A real process, as a user runs it."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "bot.cli", "diagnose", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         *args: str) -> tuple[int, str, str]:
    """In-process (the same ``bot.cli.main``), cheaper than a process per case."""
    from bot.cli import main as cli_main

    monkeypatch.setenv("COLUMNS", "200")
    code = cli_main(["diagnose", *args])
    out, err = capsys.readouterr()
    return code, out, err


def keys(host: SimHost) -> list[str]:
    return ["--ssh-key", str(host.key_path), "--known-hosts", str(host.known_hosts_path)]


def test_json_against_address(seed: SimHost) -> None:
    proc = cli(seed.target, "--playbook", "vram_idle", "--json", *keys(seed))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "ok" and doc["playbook"] == "vram_idle"
    assert [(a["kind"], a["params"]) for a in doc["actions"]] == [
        ("systemd.stop_disable", {"unit": "vllm-kimi-k25-int4.service"}),
    ]


def test_inventory_name_from_config_and_table(seed: SimHost, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "hosts": {
                    "gpu-01": {
                        "ssh": seed.target,
                        "key": str(seed.key_path),
                        "known_hosts": str(seed.known_hosts_path),
                        "expected_mounts": ["/data", "/scratch"],
                    }
                },
                "extra": {"diagnostics": {"samples": 2, "sample_interval_s": 0.2}},
            }
        )
    )
    code, out, err = main(capsys, monkeypatch, "gpu-01", "--playbook", "vm_restart",
                          "--config", str(config))
    assert code == 0, err
    assert out.startswith("gpu-01 · vm_restart · ok")
    head, context = out.splitlines()[1:3]  # the Slack message's headline, then the reboot
    assert head.startswith("vllm-kimi-k25-int4.service, auto-started at boot, holds 8 GPUs")
    assert context.startswith("Booted 23 min ago; previous boot ended without a clean")
    assert "vllm-kimi-k25-int4.service" in out and "expected mount /scratch is missing" in out
    assert "systemd.stop_disable" in out and "highest of 2 samples" in out  # extra.diagnostics


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_exits_1_with_json(seed: SimHost, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = main(capsys, monkeypatch, f"root@127.0.0.1:{_closed_port()}", "--json",
                          *keys(seed))
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "unreachable" and doc["findings"][0]["code"] == "ssh.unreachable"
    assert err.startswith("error: 127.0.0.1 is unreachable")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["not a target", "--playbook", "auto"], "is neither a host in the config"),
        (["root@127.0.0.1:22", "--ssh-key", "/nonexistent/key"], "--ssh-key: no such file"),
    ],
)
def test_bad_arguments_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = main(capsys, monkeypatch, *args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_playbook_that_is_not_a_choice_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The choices are listed in -h and checked before anything runs (typer's usage error)."""
    code, _, err = main(capsys, monkeypatch, "root@127.0.0.1:22", "--playbook", "nope")
    assert code == 2
    assert "'nope' is not one of 'vram_idle', 'vm_restart', 'disk_full', 'triage', " \
           "'gpu_health', 'auto'" in err and "Traceback" not in err


def test_bad_diagnostics_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"extra": {"diagnostics": {"samples": 0}}}))
    code, _, err = main(capsys, monkeypatch, "root@127.0.0.1:22", "--config", str(config))
    assert code == 2 and "extra.diagnostics.samples" in err
