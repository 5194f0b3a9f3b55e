"""`incident-bot extract ...` and `incident-bot worker` against a real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.cli import main
from tests.fixtures.extract import REPO, write_dataset


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _spec(tmp_path: Path, **extra: object) -> Path:
    write_dataset(tmp_path / "data.jsonl", 24)
    body = {"name": "cli run", "dataset": "data.jsonl", "output_dir": "out", "host": "h1",
            "threads": 1, "model": {"hidden": 32, "layers": 2, "heads": 4}, **extra}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                          redis_url: str) -> None:
    bad = _spec(tmp_path, batch_size=-1)
    code, _, err = cli(capsys, "extract", "submit", str(bad), "--url", redis_url)
    assert code == 2 and err.count("\n") == 1 and "key 'batch_size'" in err
    code, _, err = cli(capsys, "extract", "submit", str(_spec(tmp_path)), "--url", redis_url,
                       "--host", "h1;reboot")
    assert code == 2 and "key 'host'" in err
    code, _, err = cli(capsys, "extract", "status", "../../etc", "--url", redis_url)
    assert code == 2 and "invalid job id" in err
    code, _, err = cli(capsys, "extract", "pause", "ex-0123456789ab", "--url", redis_url)
    assert code == 2 and err.strip() == "error: no such job ex-0123456789ab"
    code, _, err = cli(capsys, "worker", "--host", "a b", "--url", redis_url)
    assert code == 2 and "invalid --host" in err
    code, _, err = cli(capsys, "extract", "status", "--url", "redis://:secret@127.0.0.1:1/0")
    assert code == 1 and "cannot reach Redis" in err and "secret" not in err


def test_submit_control_and_a_burst_worker(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           redis_url: str, redis: object) -> None:
    spec = _spec(tmp_path)
    code, out, _ = cli(capsys, "extract", "submit", str(spec), "--url", redis_url)
    assert code == 0 and out.startswith("submitted ex-") and "(24 samples) to queue h1" in out
    job = out.split()[1]
    code, out, _ = cli(capsys, "extract", "status", "--url", redis_url)
    assert code == 0 and job in out and "queued" in out and "0/24" in out
    assert cli(capsys, "extract", "pause", job, "--url", redis_url)[0] == 0
    code, out, _ = cli(capsys, "extract", "status", job, "--url", redis_url, "--json")
    assert json.loads(out)["state"] == "paused"
    code, out, _ = cli(capsys, "extract", "resume", job, "--url", redis_url)
    assert code == 0 and out.strip() == f"{job} queued again as run 2"
    worker = subprocess.run([sys.executable, "-m", "bot.cli", "worker", "--host", "h1", "--url",
                             redis_url, "--burst"], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert worker.returncode == 0, worker.stderr
    code, out, _ = cli(capsys, "extract", "status", job, "--url", redis_url)
    assert code == 0 and "[completed]" in out and "▓▓▓▓▓▓▓▓▓▓ 100.0% · 24/24" in out
    assert "cli run: completed 24/24" in out and len(list((tmp_path / "out").glob("*.pt"))) == 24
    code, out, _ = cli(capsys, "extract", "status", job, "--url", redis_url, "--watch",
                       "--interval", "0.1")
    assert code == 0 and "[completed]" in out
    code, _, err = cli(capsys, "extract", "cancel", job, "--url", redis_url)
    assert code == 2 and "already completed" in err
