"""The digest chart renders from samples stored in real Redis and reaches the thread.

The story day (tests/fixtures/samples.py) goes into ``SampleStore``; ``DigestRunner``
posts through the real ``SlackBackend`` to the Slack stand-in, which receives the PNG
via ``files_upload_v2``. The PNG is checked for being a real picture, not a blank.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from redis import Redis

from bot.chat.slack import SlackBackend, make_client
from bot.chat.terminal import TerminalBackend
from bot.digest.runner import DigestRunner
from bot.rig.slack_standin import SlackStandIn
from storage.samples import SampleStore
from tests.fixtures.samples import DAY0, story_series
from tests.fixtures.slack import CHANNEL, slack_test_settings
from tests.helpers.charts import assert_real_picture, idle_band_pixels

END = DAY0 + 86400


def store_story(redis: Redis) -> SampleStore:
    store = SampleStore(redis, retention_s=10 * 86400)
    for host, series in story_series().items():
        by_ts: dict[float, list[tuple[str, float]]] = {}
        for metric, points in series.items():
            for ts, value in points:
                by_ts.setdefault(ts, []).append((metric, value))
        for ts, readings in by_ts.items():
            store.add_many(host, ts, readings)
    return store


def test_chart_from_stored_samples_goes_to_the_digest_thread(
    redis: Redis, slack_standin: SlackStandIn, tmp_path: Path
) -> None:
    store = store_story(redis)
    assert store.hosts() == ["gpu-01", "gpu-02"]
    chat = SlackBackend(make_client(slack_test_settings(slack_standin)))
    runner = DigestRunner(store, chat, tmp_path)
    result = runner.run(CHANNEL, DAY0, END)
    post = slack_standin.wait_for("chat.postMessage")[0]
    assert "78.7 GPU-hours" in str(post.params.get("text"))
    complete = slack_standin.wait_for("files.completeUploadExternal")[0]
    assert complete.params.get("thread_ts") == result.ref.ts
    assert complete.params.get("channel_id") == CHANNEL
    (png,) = slack_standin.uploads.values()
    assert result.chart is not None and png == result.chart.read_bytes()
    img = assert_real_picture(png)
    top, bottom = img[: img.shape[0] // 2], img[img.shape[0] // 2 :]
    # gpu-01 (top row) wasted ten hours of 8 GPUs: a wide red band; gpu-02 none
    assert idle_band_pixels(top) > 20_000
    assert idle_band_pixels(bottom) < 500


def test_terminal_backend_writes_the_png_and_prints_its_path(
    redis: Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_story(redis)
    runner = DigestRunner(store, TerminalBackend(upload_dir=tmp_path / "shown"), tmp_path / "out")
    result = runner.run("terminal", DAY0, END)
    out = capsys.readouterr().out
    assert result.chart is not None and result.chart.exists()
    shown = tmp_path / "shown" / result.chart.name
    assert str(shown) in out.replace("\n", "")
    assert_real_picture(shown.read_bytes())


def test_empty_period_still_renders_a_chart_that_says_so(redis: Redis, tmp_path: Path) -> None:
    runner = DigestRunner(SampleStore(redis), TerminalBackend(), tmp_path)
    result = runner.run("terminal", DAY0, END)
    assert result.digest.hosts == ()
    assert result.chart is not None and result.chart.stat().st_size > 5_000
