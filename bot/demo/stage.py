"""The demo's world: Redis, a seed-scenario sim host, a crashed extraction, the bot's HTTP
service and an RQ worker. Everything is started here and stopped in ``close`` by PID.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from bot.config.settings import AlertSettings, HostSettings, Settings, SlackSettings
from bot.extract.demo_data import prepare_interrupted_run
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.serving import ServedApp
from bot.sim.sshd import SimHost, start_sim

DEMO_HOST = "gpu-01"
DEMO_APPROVER = "U0DEMO0NCALL"
DEMO_CHANNEL = "gpu-incidents"


@dataclass
class Stage:
    workdir: Path
    redis_url: str
    sim: SimHost
    spec_path: Path
    settings: Settings
    local_redis: LocalRedis | None = None
    http: ServedApp | None = None
    worker: subprocess.Popen[bytes] | None = None
    timings: list[tuple[str, float]] = field(default_factory=list)

    def close(self) -> None:
        """Stop what the demo started, newest first; each by its PID."""
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGTERM)
            try:
                self.worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.worker.pid, signal.SIGKILL)
                self.worker.wait(timeout=10)
        if self.http is not None:
            self.http.stop()
        self.sim.stop()
        if self.local_redis is not None:
            self.local_redis.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def demo_settings(redis_url: str, sim: SimHost, token: str) -> Settings:
    host = HostSettings(ssh=sim.target, key=str(sim.key_path),
                        known_hosts=str(sim.known_hosts_path))
    return Settings(
        redis_url=redis_url,
        hosts={DEMO_HOST: host},
        slack=SlackSettings(channel=DEMO_CHANNEL, approvers=[DEMO_APPROVER]),
        alerts=AlertSettings(group_wait_s=0.0),
        chat_backend="terminal",
        extra={"remediation": {"chain_resume": True, "settle_s": 0.5, "poll_interval_s": 0.2}},
        incident_bot_alert_token=SecretStr(token),
    )


def start_worker(redis_url: str, workdir: Path) -> subprocess.Popen[bytes]:
    """A real RQ worker process for the demo host's queue (its own process group)."""
    log = (workdir / "worker.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "worker", "--host", DEMO_HOST, "--url", redis_url,
         "--fast"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def build_stage(redis_url: str | None) -> Stage:
    """Start everything; on a failure half-way, stop what already started."""
    workdir = Path(tempfile.mkdtemp(prefix="incident-bot-demo-"))
    local = None if redis_url else start_local_redis(workdir / "redis")
    url = redis_url or (local.url if local else "")
    sim: SimHost | None = None
    try:
        t0 = time.monotonic()
        sim = start_sim("seed", workdir=workdir / "sim")
        spec_path = prepare_interrupted_run(workdir / "extract")
        settings = demo_settings(url, sim, secrets.token_urlsafe(24))
        stage = Stage(workdir, url, sim, spec_path, settings, local)
        took = time.monotonic() - t0
        stage.timings.append(("set-up (redis, sim host, crashed extraction)", took))
        return stage
    except BaseException:
        if sim is not None:
            sim.stop()
        if local is not None:
            local.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
