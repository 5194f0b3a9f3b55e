"""The demo's world: Redis, a seed-scenario sim host, a crashed extraction, the bot's HTTP
service and an RQ worker. Everything is started here and stopped in ``close`` by PID;
``close`` then removes the demo's folder and says what, if anything, is still there.

Each step says what it starts as it starts it (``say``), so the screen is never blank.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from bot.config.settings import AlertSettings, HostSettings, Settings, SlackSettings
from bot.core import fmt, strings
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.serving import ServedApp
from bot.sim.sshd import SimHost, start_sim

DEMO_HOST = "gpu-01"
DEMO_APPROVER = "U0DEMO0NCALL"
DEMO_CHANNEL = "gpu-incidents"
DEMO_SAMPLES = 200


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
    setup_s: float = 0.0  # everything started before the alert
    waited_s: float = 0.0  # a person deciding: shown, never counted in a step
    done_before: int = 0  # the job's done count when the VM died (its last report)

    def close(self) -> Closed:
        """Stop what the demo started, newest first, each by its PID; remove the folder.
        Returns what was stopped and anything still running or left on disk."""
        stopped, left = [], []
        if self.worker is not None:
            _stop_group(self.worker)
            stopped.append("the worker")
            if self.worker.poll() is None:
                left.append(f"worker pid {self.worker.pid}")
        if self.http is not None:
            self.http.stop()
            stopped.append("the HTTP service")
        self.sim.stop()
        stopped.append(f"the simulated host {self.sim.name}")
        if self.sim.alive():
            left.append(f"sshd pid {self.sim.pid}")
        if self.local_redis is not None:
            self.local_redis.stop()
            stopped.append("Redis")
        left += _remove(self.workdir)
        return Closed(tuple(stopped), tuple(left))


@dataclass(frozen=True)
class Closed:
    stopped: tuple[str, ...]
    left: tuple[str, ...]  # processes still running, paths still on disk (with why)


def _stop_group(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is not None:
        return
    os.killpg(worker.pid, signal.SIGTERM)
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)


def _remove(workdir: Path) -> list[str]:
    """Remove the demo's folder; what could not be removed, with why (never silently)."""
    failed: list[str] = []

    def note(_fn: object, path: str, info: tuple[type, BaseException, object]) -> None:
        failed.append(f"{path} ({info[1]})")

    shutil.rmtree(workdir, onerror=note)  # onexc from Python 3.12 on; 3.11 is supported
    if workdir.exists() and not failed:
        failed.append(f"{workdir} (still there)")
    return failed


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


def boot_time(sim: SimHost) -> float:
    """When the simulated host booted (the state its ``uptime`` and journal answer from)."""
    return float(sim.state()["boot"]["time"])


def build_stage(redis_url: str | None, say: Callable[[str], None],
                preload: Callable[[], object] = lambda: None) -> Stage:
    """Start Redis and the sim host, run ``preload`` (the bot's own imports), then leave
    the crashed extraction, saying each as it starts; on a failure half-way, stop what
    already started."""
    t0 = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="incident-bot-demo-"))
    local: LocalRedis | None = None
    sim: SimHost | None = None
    try:
        if redis_url:
            say(strings.DEMO_STEP_REDIS_GIVEN.format(url=redis_url))
        else:
            local = start_local_redis(workdir / "redis")
            say(strings.DEMO_STEP_REDIS.format(port=local.port))
        url = redis_url or (local.url if local else "")
        sim = start_sim("seed", workdir=workdir / "sim")
        say(strings.DEMO_STEP_SIM.format(host=sim.name, port=sim.port,
                                         ago=fmt.age(time.time(), boot_time(sim))))
        say(strings.DEMO_STEP_LOADING)
        preload()
        say(strings.DEMO_STEP_EXTRACT_START.format(total=DEMO_SAMPLES))
        from bot.extract.demo_data import prepare_interrupted_run  # torch: loaded from here

        spec_path = prepare_interrupted_run(workdir / "extract", samples=DEMO_SAMPLES)
        settings = demo_settings(url, sim, secrets.token_urlsafe(24))
        stage = Stage(workdir, url, sim, spec_path, settings, local)
        stage.setup_s = time.monotonic() - t0
        return stage
    except BaseException:
        if sim is not None:
            sim.stop()
        if local is not None:
            local.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
