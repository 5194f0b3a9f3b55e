"""``incident-bot serve`` as a real child process for fault tests: started, SIGKILLed by
PID and started again on the same config, port and Redis; its log kept in a file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bot.core.procs import free_port
from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost

ROOT = Path(__file__).resolve().parents[2]
ALERT_TOKEN = "fault-alert-token"
SIGNING_SECRET = "fault-signing-secret"
BOT_TOKEN = "xoxb-fault"
CHANNEL = "C0FAULTS"


def bot_config(path: Path, sim: SimHost, standin: SlackStandIn, port: int,
               reconcile: dict[str, float], extra: dict[str, Any] | None = None) -> Path:
    """One sim host as ``gpu-01``, Slack at the stand-in, no scheduler, the given
    reconciler timings and any other ``extra`` sections (YAML written as JSON, its subset)."""
    path.write_text(json.dumps({
        "http": {"host": "127.0.0.1", "port": port},
        "hosts": {"gpu-01": {"ssh": sim.target, "key": str(sim.key_path),
                             "known_hosts": str(sim.known_hosts_path)}},
        "slack": {"channel": CHANNEL, "approvers": ["UALICE"], "api_url": standin.api_url},
        "extra": {"scheduler": {"enabled": False}, "reconcile": reconcile, **(extra or {})},
    }))
    return path


@dataclass
class ServeProcess:
    config: Path
    redis_url: str
    logfile: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> ServeProcess:
        env = {**os.environ, "REDIS_URL": self.redis_url, "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN,
               "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
               "PYTHONPATH": str(ROOT), "INCIDENT_BOT_LOG_LEVEL": "INFO"}
        with self.logfile.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "serve", "--config", str(self.config),
                 "--port", str(self.port)], env=env, cwd=ROOT, stdout=log, stderr=log)
        assert wait_until(self._ready, timeout_s), f"serve did not start: {self.log()[-2000:]}"
        return self

    def _ready(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log()[-2000:]
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL, by PID: no shutdown hook runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    def post_alert(self, payload: dict[str, Any], timeout_s: float = 10) -> httpx.Response:
        return httpx.post(f"{self.url}/alerts/alertmanager", json=payload, timeout=timeout_s,
                          headers={"Authorization": f"Bearer {ALERT_TOKEN}"})


def wait_until(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds (a state, never a moment) or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def dead_owner() -> str:
    """An owner token (``host:pid:thread``) of a process on this machine that has exited."""
    import socket

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return f"{socket.gethostname()}:{done.stdout.strip()}:1"
