"""Host sampling: the sample store on real Redis, the sampler, the SSH probe on a sim host."""

from __future__ import annotations

import pytest
from redis import Redis

from bot.digest.sampler import Sampler, readings_from, ssh_probe
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage import keys
from storage.samples import SampleStore

T0 = 1_800_000_000.0


def test_store_range_trim_and_index(redis: Redis) -> None:
    store = SampleStore(redis, retention_s=100)
    for i in range(5):
        store.add_many(
            "gpu-01", T0 + 40 * i, [("gpu0.util_pct", float(i)), ("disk:/data.used_bytes", 1e9 * i)]
        )
    store.add("gpu-01", "gpu0.util_pct", T0 + 160, 4.0)  # the same sample again: no duplicate
    assert store.range("gpu-01", "gpu0.util_pct", 0, T0 + 1000) == [
        (T0 + 80, 2.0),
        (T0 + 120, 3.0),
        (T0 + 160, 4.0),
    ]  # older than 100 s were trimmed
    assert store.range("gpu-01", "gpu0.util_pct", T0 + 100, T0 + 130) == [(T0 + 120, 3.0)]
    assert store.hosts() == ["gpu-01"]
    assert store.metrics("gpu-01") == ["disk:/data.used_bytes", "gpu0.util_pct"]
    series = store.host_series("gpu-01", T0 + 100, T0 + 200)
    assert series["disk:/data.used_bytes"] == [(T0 + 120, 3e9), (T0 + 160, 4e9)]
    ttl = redis.ttl(keys.samples("gpu-01", "gpu0.util_pct"))
    assert 0 < int(ttl) <= 100  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "metric", "value"),
    [
        ("gpu 01", "gpu0.util_pct", 1.0),
        ("$(reboot)", "gpu0.util_pct", 1.0),
        ("gpu-01", "gpu0|util", 1.0),
        ("gpu-01", "", 1.0),
        ("gpu-01", "gpu0.util_pct", float("nan")),
    ],
)
def test_store_rejects_bad_names_and_values(
    redis: Redis, host: str, metric: str, value: float
) -> None:
    with pytest.raises(ValueError):
        SampleStore(redis).add(host, metric, T0, value)
    assert redis.dbsize() == 0


def test_sampler_keeps_going_when_one_host_fails(redis: Redis) -> None:
    def probe(host: str) -> list[tuple[str, float]]:
        if host == "bad":
            raise OSError("connection refused")
        return [("gpu0.util_pct", 50.0), ("gpu0.mem_used_mib", 1000.0)]

    store = SampleStore(redis)
    sampler = Sampler(store, probe, lambda: ["gpu-01", "bad", "gpu-02"], clock=lambda: T0)
    result = sampler.sample_once()
    assert result["gpu-01"] == 2 and result["gpu-02"] == 2
    assert str(result["bad"]).startswith("error: OSError: connection refused")
    assert store.hosts() == ["gpu-01", "gpu-02"]
    assert store.range("gpu-02", "gpu0.util_pct", 0, T0) == [(T0, 50.0)]


def test_readings_parser_keeps_only_wanted_mounts() -> None:
    gpu = ("0, GPU-aaa, 77611, 81559, 0, NVIDIA H100 80GB HBM3\n"
           "1, GPU-bbb, 10, 81559, 3, NVIDIA H100\n")
    df = (
        "Filesystem Type 1B-blocks Used Available Capacity Mounted on\n"
        "/dev/vdb ext4 4000000000 3000000000 1000000000 75% /data\n"
        "/dev/vda1 ext4 100 50 50 50% /\n"
    )
    got = dict(readings_from(gpu, df, ["/data"]))
    assert got["gpu0.mem_used_mib"] == 77611 and got["gpu0.util_pct"] == 0
    assert got["gpu1.mem_total_mib"] == 81559
    assert got["disk:/data.used_bytes"] == 3e9 and got["disk:/data.size_bytes"] == 4e9
    assert "disk:/.used_bytes" not in got


def test_ssh_probe_samples_the_sim_host(redis: Redis, seed_sim: SimHost) -> None:
    store = SampleStore(redis)
    with ParamikoPool() as pool:
        probe = ssh_probe(pool, lambda _h: seed_sim.ssh_target(), lambda _h: ["/data", "/"])
        Sampler(store, probe, lambda: [seed_sim.name], clock=lambda: T0).sample_once()
    metrics = store.metrics(seed_sim.name)
    gpu_mem = [m for m in metrics if m.endswith(".mem_used_mib")]
    assert len(gpu_mem) == 8, metrics  # the seed VM has 8 GPUs
    assert "disk:/data.used_bytes" in metrics and "disk:/data.size_bytes" in metrics
    used = store.range(seed_sim.name, "disk:/data.used_bytes", T0, T0)[0][1]
    size = store.range(seed_sim.name, "disk:/data.size_bytes", T0, T0)[0][1]
    assert 0 < used <= size


def test_ssh_probe_refuses_a_relative_mount(seed_sim: SimHost) -> None:
    with ParamikoPool() as pool:
        probe = ssh_probe(pool, lambda _h: seed_sim.ssh_target(), lambda _h: ["data; reboot"])
        with pytest.raises(ValueError, match="not an absolute mount"):
            probe(seed_sim.name)
