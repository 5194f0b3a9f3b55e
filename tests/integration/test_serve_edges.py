"""``incident-bot serve`` as a real process against hostile clients: a 100 MB chunked body is
refused without being read (RSS stays low), a client trickling headers is cut off."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.core.procs import free_port
from bot.rig.slack_standin import SlackStandIn
from tests.fixtures.alerts import ALERT_TOKEN
from tests.helpers.hostile import chunked_post, trickle_headers

ROOT = Path(__file__).resolve().parents[2]
SECRET, TOKEN = "edge-secret-0123456789", "xoxb-edge-test"
HEADER_TIMEOUT_S = 1.0
MB = 1024 * 1024


def rss_kib(pid: int, field: str = "VmHWM") -> int:
    """The process's resident set (VmRSS) or its peak so far (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


@pytest.fixture
def serve(tmp_path: Path, redis_url: str) -> Iterator[tuple[str, int]]:
    """The whole bot (Slack included, against the stand-in), slow-client limits tightened."""
    standin = SlackStandIn(token=TOKEN).start()
    port = free_port()
    config = tmp_path / "bot.yaml"
    config.write_text(
        f"http: {{host: 127.0.0.1, port: {port}, header_timeout_s: {HEADER_TIMEOUT_S}, "
        "body_timeout_s: 2}\n"
        f"slack: {{channel: C0EDGE, approvers: [UALICE], api_url: '{standin.api_url}'}}\n"
        "extra: {scheduler: {enabled: false}}\n")
    env = {**os.environ, "REDIS_URL": redis_url, "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN,
           "SLACK_SIGNING_SECRET": SECRET, "SLACK_BOT_TOKEN": TOKEN}
    env.pop("SLACK_APP_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--config", str(config)],
                            env=env, cwd=ROOT, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        standin.stop()


def test_100mb_chunked_unsigned_is_refused_with_low_rss(serve: tuple[str, int]) -> None:
    url, pid = serve
    before = rss_kib(pid, "VmRSS")
    status, body, sent = chunked_post(url, "/slack/events", 100 * MB)
    peak = rss_kib(pid)
    print(f"serve RSS before {before / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, "
          f"client sent {sent / MB:.1f} MiB of 100 before the {status}")
    assert status in (401, 413) and b"error" in body
    assert sent < 100 * MB and peak < 200 * 1024
    assert httpx.get(f"{url}/healthz").status_code == 200  # still serving


def test_trickled_headers_are_cut_off(serve: tuple[str, int]) -> None:
    url, _ = serve
    elapsed = [trickle_headers(url, limit_s=HEADER_TIMEOUT_S + 10) for _ in range(2)]
    assert all(HEADER_TIMEOUT_S * 0.9 <= e <= HEADER_TIMEOUT_S + 2 for e in elapsed), elapsed


def test_serve_with_redis_unreachable_at_start_prints_one_line(tmp_path: Path) -> None:
    """Issue 39: a traceback and "internal error …" used to reach the terminal; now the
    documented line (docs/production.md), exit status 2, and the password never shown."""
    config = tmp_path / "bot.yaml"
    config.write_text("slack: {channel: C0EDGE, approvers: [UALICE]}\n"
                      "extra: {scheduler: {enabled: false}}\n")
    dead = free_port()  # nothing listens here
    env = {**os.environ, "REDIS_URL": f"redis://:s3cret@127.0.0.1:{dead}/0",
           "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN, "SLACK_SIGNING_SECRET": SECRET,
           "SLACK_BOT_TOKEN": TOKEN}
    env.pop("SLACK_APP_TOKEN", None)
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "serve", "--config", str(config)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: cannot reach Redis at redis://***@127.0.0.1:{dead}/0: ")
    assert "s3cret" not in proc.stderr
