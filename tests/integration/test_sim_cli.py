"""`sim up` prints the `diagnose` line that reaches the host it started (and that line
works as printed); `sim down` with no --dir/--port stops the one host that is up, and
says which ones when there are several, or that there are none."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from bot.cli import main as cli_main
from bot.core.procs import free_port
from bot.sim.sshd import load_sim


def up(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    port = free_port()
    workdir = root / str(port)
    assert cli_main(["sim", "up", "seed", "--port", str(port), "--dir", str(workdir)]) == 0
    return workdir, capsys.readouterr().out


def test_up_prints_a_diagnose_line_that_works_and_down_finds_the_one_host(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workdir, printed = up(tmp_path, capsys)
    try:
        line = next(x.split(":", 1)[1].strip() for x in printed.splitlines()
                    if x.strip().startswith("diagnose:"))
        argv = shlex.split(line)
        assert argv[:2] == ["incident-bot", "diagnose"]
        assert cli_main([*argv[1:], "--playbook", "vram_idle", "--json"]) == 0
        found = json.loads(capsys.readouterr().out)
        assert found["status"] == "ok" and found["playbook"] == "vram_idle"
    finally:
        assert cli_main(["sim", "down", "--root", str(tmp_path)]) == 0
    assert "stopped simulated host gpu-01" in capsys.readouterr().out
    assert not load_sim(workdir).alive()


def test_down_without_a_target_names_the_hosts_when_several_or_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["sim", "down", "--root", str(tmp_path)]) == 2
    assert "no simulated host is up" in capsys.readouterr().err
    first, _ = up(tmp_path, capsys)
    second, _ = up(tmp_path, capsys)
    try:
        assert cli_main(["sim", "down", "--root", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "2 simulated hosts are up" in err
        assert f"sim down --dir {first}" in err and f"sim down --dir {second}" in err
        assert load_sim(first).alive() and load_sim(second).alive()  # nothing stopped
    finally:
        for workdir in (first, second):
            assert cli_main(["sim", "down", "--dir", str(workdir)]) == 0
