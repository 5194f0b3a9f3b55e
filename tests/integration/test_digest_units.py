"""The digest's per-unit waste from stored incidents: the unit comes from the incident's
own diagnosis (the real seed host's, over real SSH), so a known history gives exact
GPU-hours per unit, read back from Redis the way the scheduled digest reads it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from redis import Redis

from bot.chat.terminal import TerminalBackend
from bot.digest.runner import DigestRunner, StoreIncidents, incident_record
from bot.domain.incident import Alert, Severity
from bot.domain.lifecycle import IncidentState
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from playbooks import run_playbook
from storage.incidents import IncidentStore
from storage.samples import SampleStore

UNIT = "vllm-kimi-k25-int4.service"
T0 = 1_764_000_000.0


def held_idle(samples: SampleStore, host: str, gpus: int) -> None:
    """An hour of one sample a minute: every GPU holds 75.8 GiB at 0%."""
    for t in range(0, 3601, 60):
        points = [(f"gpu{i}.{name}", value) for i in range(gpus)
                  for name, value in (("mem_used_mib", 77_600.0), ("util_pct", 0.0))]
        samples.add_many(host, T0 + t, points)


def test_per_unit_waste_comes_from_each_incidents_diagnosis(
        redis: Redis, seed_sim: SimHost, tmp_path: Path) -> None:
    pool = ParamikoPool(SSHSettings(connect_timeout_s=2.0))
    try:
        diagnosis = run_playbook(pool, seed_sim.ssh_target(), "vram_idle")
    finally:
        pool.close()
    now = [T0 + 600]
    store = IncidentStore(redis, clock=lambda: now[0])
    seen, _ = store.open_or_fold(Alert(source="test", host="gpu-01", kind="vram_idle",
                                       severity=Severity.CRITICAL))
    store.update(seen.id, lambda i: replace(i, diagnosis=diagnosis))
    undiagnosed, _ = store.open_or_fold(Alert(source="test", host="gpu-02", kind="vram_idle"))
    now[0] = T0 + 2400
    store.transition(seen.id, IncidentState.RESOLVED, "UALICE", "fixed")
    samples = SampleStore(redis)
    held_idle(samples, "gpu-01", 2)
    held_idle(samples, "gpu-02", 1)

    assert incident_record(store.require(seen.id)).unit == UNIT
    assert incident_record(store.require(undiagnosed.id)).unit == ""
    runner = DigestRunner(samples, TerminalBackend(), tmp_path, incidents=StoreIncidents(store))
    digest, _ = runner.build(T0, T0 + 3600)
    assert digest.waste.by_host == pytest.approx({"gpu-01": 2.0, "gpu-02": 1.0})
    # 2 GPUs × the 30 min the incident was open go to its unit; the rest nobody explained
    assert digest.waste.by_unit == pytest.approx({UNIT: 1.0, "unattributed": 2.0})
