"""The agent loop: check, buffer, send; back off while the bot is unreachable."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from bot.agent.checks import (
    Alert,
    Conditions,
    boot_changed,
    disk_conditions,
    disk_usage,
    read_boot_id,
    reboot_alert,
)
from bot.agent.client import Reply, post_alerts
from bot.agent.config import AgentConfig
from bot.agent.gpu import IdleTracker, NvmlSampler, vram_condition
from bot.agent.health import HealthWatch
from bot.agent.outbox import Outbox
from bot.core.durable import atomic_write
from bot.domain.backoff import Backoff

log = logging.getLogger(__name__)
EX_TEMPFAIL = 75  # --once: alerts are buffered on disk, not yet delivered
MAX_BACKOFF_S = 300.0
BACKOFF = Backoff(1.0, MAX_BACKOFF_S)  # 1, 2, 4 … 300 s: the one rule, bot/domain/backoff.py
Sender = Callable[[str, str, list[dict[str, Any]], float], Reply]


class Agent:
    def __init__(self, config: AgentConfig, *, nvml: ModuleType | None = None,
                 clock: Callable[[], float] = time.time, send: Sender = post_alerts) -> None:
        self.config = config
        config.state_dir.mkdir(parents=True, exist_ok=True)
        self.outbox = Outbox(config.state_dir)
        self.conditions = Conditions(config.state_dir / "conditions.json")
        self.sampler = NvmlSampler(nvml)
        self.idle = IdleTracker(config.vram_used_pct, config.util_max_pct, config.idle_for_s)
        self.health = HealthWatch(config.expected_gpus)
        self.clock = clock
        self.send = send
        self.batch = config.batch
        self.backoff_s, self.failures = 0.0, 0  # failed sends in a row, and the wait they earn
        self.stop = threading.Event()

    # --- checks ----------------------------------------------------------------------
    def check(self) -> int:
        """Run every check; buffer the alerts on disk before remembering any new state."""
        boot = self._boot()
        alerts = boot[0] + self._disk() + self._gpu()
        for alert in alerts:
            self.outbox.put(alert)
        self.conditions.save()
        if boot[1] is not None:
            atomic_write(self.config.state_dir / "boot_id", boot[1])
        return len(alerts)

    def _boot(self) -> tuple[list[Alert], str | None]:
        try:
            current = read_boot_id(self.config.boot_id_path)
        except OSError as exc:
            log.warning("boot id check skipped: %s", exc)
            return [], None
        previous = boot_changed(current, self.config.state_dir / "boot_id")
        alerts = [reboot_alert(self.config.host, previous, current)] if previous else []
        return alerts, current

    def _disk(self) -> list[Alert]:
        usages = []
        for mount in self.config.mounts:
            try:
                usages.append(disk_usage(mount))
            except OSError as exc:
                log.warning("disk check of %s skipped: %s", mount, exc)
        now = disk_conditions(usages, self.config.disk_used_pct, self.config.inodes_used_pct)
        return self.conditions.diff(self.config.host, "disk_full", now)

    def _gpu(self) -> list[Alert]:
        samples = self.sampler.sample()
        if not self.sampler.ready:
            return []
        idle = self.idle.update(samples, self.clock())
        now = vram_condition(idle, self.config.idle_for_s)
        return self.conditions.diff(self.config.host, "vram_idle", now) + self._health()

    def _health(self) -> list[Alert]:
        """Critical Xid events, missing or lost GPUs and uncorrectable ECC."""
        nvml, host = self.sampler.nvml, self.config.host
        try:
            alerts = self.health.xid_alerts(host, nvml)
            alerts += self.conditions.diff(host, "gpu_missing", self.health.missing(nvml))
            return alerts + self.conditions.diff(host, "gpu_ecc", self.health.ecc(nvml))
        except Exception as exc:  # NVML failing mid-check must not stop the other checks
            log.warning("GPU health check skipped this round: %s", exc)
            return []

    # --- delivery --------------------------------------------------------------------
    def flush(self) -> bool:
        """Send what is buffered; True when the outbox is empty."""
        while not self.stop.is_set():
            batch = self.outbox.pending(self.batch)
            if not batch:
                return True
            reply = self.send(self.config.alerts_url, self.config.token, [a for _, a in batch],
                              self.config.timeout_s)
            if not self._handle(reply, [p for p, _ in batch]):
                return False
        return False

    def _handle(self, reply: Reply, paths: list[Any]) -> bool:
        """Whether to keep sending now."""
        if reply.ok:
            self.outbox.remove(paths)
            self.backoff_s, self.failures = 0.0, 0
            self.batch = self.config.batch if len(paths) == 1 else self.batch
            return True
        if reply.status in (400, 413) and len(paths) > 1:
            self.batch = 1 if reply.status == 400 else max(1, len(paths) // 2)
            return True
        if reply.status in (400, 413):
            self.outbox.reject(paths[0], f"HTTP {reply.status}: {reply.body}")
            return True
        level = logging.WARNING if reply.retryable else logging.ERROR
        log.log(level, "bot did not take %d alert(s) (HTTP %s: %s); kept on disk, %d buffered",
                len(paths), reply.status or "no answer", reply.body[:200], len(self.outbox))
        self.failures += 1
        self.backoff_s = BACKOFF.after(self.failures)
        return False

    # --- loop ------------------------------------------------------------------------
    def run_once(self) -> int:
        self.check()
        delivered = self.flush()
        self.health.close(self.sampler.nvml)
        self.sampler.close()
        return 0 if delivered else EX_TEMPFAIL

    def run(self) -> int:
        self._signals()
        next_check = 0.0
        while not self.stop.is_set():
            if self.clock() >= next_check:
                self.check()
                next_check = self.clock() + self.config.interval_s
            delivered = self.flush()
            wait = next_check - self.clock()
            if not delivered:
                wait = min(wait, self.backoff_s)
            self.stop.wait(max(0.0, wait))
        self.health.close(self.sampler.nvml)
        self.sampler.close()
        return 0

    def _signals(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop.set())
