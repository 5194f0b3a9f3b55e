"""`incident-bot digest now`: the terminal digest from real Redis, chart path printed last."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis import Redis

from bot.cli import main
from storage.samples import SampleStore
from tests.fixtures.samples import DAY0, story_series
from tests.helpers.charts import assert_real_picture

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, redis_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url, "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def store_last_day(redis: Redis) -> None:
    """The story day, shifted so it ends now."""
    shift = time.time() - (DAY0 + 86400)
    store = SampleStore(redis)
    for host, series in story_series(step_s=900).items():
        by_ts: dict[float, list[tuple[str, float]]] = {}
        for metric, points in series.items():
            for ts, v in points:
                by_ts.setdefault(ts + shift, []).append((metric, v))
        for ts, readings in by_ts.items():
            store.add_many(host, ts, readings)


def test_digest_now_prints_the_digest_and_the_chart_path(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    store_last_day(redis)
    proc = cli("digest", "now", "--out", str(tmp_path), "--hours", "24", redis_url=redis_url)
    assert proc.returncode == 0, proc.stderr
    assert "Health digest" in proc.stdout and "gpu-01" in proc.stdout
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("chart: ")
    chart = Path(last.removeprefix("chart: "))
    assert chart.parent == tmp_path.resolve() and chart.suffix == ".png"
    assert_real_picture(chart.read_bytes())


def test_digest_now_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["digest", "now", "--hours", "-1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --hours must be more than 0 and at most 744, got -1"
    )
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    assert main(["digest", "now", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot reach Redis at redis://127.0.0.1:1/0")
    assert len(err.splitlines()) == 1
