"""`incident-bot serve` as a real process: starts, answers, refuses bad config, stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bot.core.procs import free_port
from tests.fixtures.alerts import ALERT_TOKEN, AUTH, am_alert, am_payload

ROOT = Path(__file__).resolve().parents[2]


def test_serve_process_end_to_end(tmp_path: Path, redis_url: str) -> None:
    port = free_port()
    config = tmp_path / "bot.yaml"
    config.write_text(f"http: {{host: 127.0.0.1, port: {port}}}\nalerts: {{group_wait_s: 5}}\n")
    env = {**os.environ, "REDIS_URL": redis_url, "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--alerts-only",
                             "--config", str(config)],
                            env=env, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.1)
        response = httpx.post(f"{url}/alerts/alertmanager", headers=AUTH, timeout=10,
                              json=am_payload(am_alert("gpu-01")))
        assert response.status_code == 200 and response.json()["incidents"]
        assert "incident_bot_alerts_received_total" in httpx.get(f"{url}/metrics").text
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    # uvicorn shuts down cleanly, then re-raises SIGTERM so the exit status tells why
    assert proc.returncode in (0, -signal.SIGTERM)


def test_serve_bad_config_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text("alerts: {kinds: {X: 'Not A Kind'}}\n")
    out = subprocess.run([sys.executable, "-m", "bot.cli", "serve", "--alerts-only",
                          "--config", str(config)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={**os.environ, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "alerts.kinds" in out.stderr


def test_serve_without_slack_secrets_says_how_to_run_alerts_only(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    env["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"
    out = subprocess.run([sys.executable, "-m", "bot.cli", "serve"], capture_output=True,
                         text=True, timeout=60, cwd=ROOT, env=env)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()  # one line per missing secret, each named
    assert lines and all(line.startswith("error: environment: SLACK_") for line in lines), lines
    assert "--alerts-only" in out.stderr
