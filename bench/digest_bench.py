"""Digest and scheduler benchmark, side by side in one run on a private redis-server.

1. sample writes: one pipelined ``add_many`` per probe vs one ``add`` per metric
   (an 8-GPU host with two disks: 26 readings a probe)
2. a fleet day: HOSTS hosts × 8 GPUs sampled every minute, stored, then the digest
   built from Redis (read + compute) and its chart drawn
3. leader takeover: the leader's thread stops holding the lease (as if killed) TRIALS
   times; time until the other replica runs the scheduler, against the bound ttl + renew

Usage: python bench/digest_bench.py [--hosts 10] [--trials 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.chat.terminal import TerminalBackend  # noqa: E402
from bot.digest.charts import render_chart  # noqa: E402
from bot.digest.runner import DigestRunner  # noqa: E402
from bot.rig.localredis import start_local_redis  # noqa: E402
from bot.schedule.leader import LeaderScheduler, ScheduledJob  # noqa: E402
from storage.claims import Claims  # noqa: E402
from storage.connection import connect  # noqa: E402
from storage.leases import scheduler_lease  # noqa: E402
from storage.samples import SampleStore  # noqa: E402

T0 = 1_800_000_000.0
GIB = 1024**3


def readings(host: int, k: int) -> list[tuple[str, float]]:
    idle = host % 4 == 0 and k > 600  # every fourth host holds VRAM idle after 10 h
    out: list[tuple[str, float]] = []
    for i in range(8):
        out += [(f"gpu{i}.mem_used_mib", 77_000.0 if idle else 60_000.0 + (k + i) % 500),
                (f"gpu{i}.util_pct", 0.0 if idle else 80.0 + (k * 7 + i) % 20),
                (f"gpu{i}.mem_total_mib", 81_559.0)]
    out += [("disk:/data.used_bytes", (2000 + k * 0.5) * GIB),
            ("disk:/data.size_bytes", 3800 * GIB)]
    return out


def bench_writes(store: SampleStore, probes: int) -> tuple[float, float]:
    t = time.perf_counter()
    for k in range(probes):
        store.add_many("w-pipe", T0 + k, readings(1, k))
    pipelined = time.perf_counter() - t
    t = time.perf_counter()
    for k in range(probes):
        for metric, value in readings(1, k):
            store.add("w-each", metric, T0 + k, value)
    each = time.perf_counter() - t
    return pipelined, each


def bench_fleet(store: SampleStore, hosts: int, out: Path) -> dict[str, float]:
    t = time.perf_counter()
    for h in range(hosts):
        for k in range(1441):
            store.add_many(f"gpu-{h:03d}", T0 + 60 * k, readings(h, k))
    stored = time.perf_counter() - t
    runner = DigestRunner(store, TerminalBackend(), out)
    t = time.perf_counter()
    digest, series = runner.build(T0, T0 + 86400)
    built = time.perf_counter() - t
    t = time.perf_counter()
    path = render_chart(digest, series, out / "fleet.png")
    drawn = time.perf_counter() - t
    points = sum(len(p) for s in series.values() for p in s.values())
    wasting = sum(1 for h in digest.hosts if h.idle_gpu_minutes > 0)
    return {"store_s": stored, "build_s": built, "chart_s": drawn, "points": points,
            "png_kib": path.stat().st_size / 1024, "wasting_hosts": wasting,
            "hosts": len(digest.hosts)}


def bench_takeover(url: str, trials: int, ttl: float, renew: float) -> list[float]:
    times = []
    for _ in range(trials):
        a = LeaderScheduler(Claims(connect(url)), scheduler_lease(connect(url), ttl),
                            [ScheduledJob("noop", lambda f: None, every_s=3600)],
                            renew_s=renew).start()
        while not a.is_leader:
            time.sleep(0.01)
        b = LeaderScheduler(Claims(connect(url)), scheduler_lease(connect(url), ttl),
                            [ScheduledJob("noop", lambda f: None, every_s=3600)],
                            renew_s=renew).start()
        time.sleep(renew * 1.5)
        a.stop(release=False)
        t = time.monotonic()
        while not b.is_leader:
            time.sleep(0.01)
        times.append(time.monotonic() - t)
        b.stop()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    server = start_local_redis()
    try:
        redis = connect(server.url)
        store = SampleStore(redis, retention_s=10 * 86400)
        pipelined, each = bench_writes(store, 300)
        print("1. sample writes, 300 probes x 26 readings (AOF always):")
        print(f"   add_many per probe {pipelined:6.2f} s  ({300 / pipelined:7.0f} probes/s)")
        print(f"   add per reading    {each:6.2f} s  ({300 / each:7.0f} probes/s)")
        print(f"   ratio              {each / pipelined:6.1f}x faster pipelined")
        redis.flushdb()  # the fleet day alone: step 1's two hosts must not join the digest
        with tempfile.TemporaryDirectory() as tmp:
            f = bench_fleet(store, args.hosts, Path(tmp))
        print(f"2. fleet day: {f['hosts']:.0f} hosts in the digest (asked {args.hosts}) x 8 GPUs, "
              f"1 sample/min, {f['points']:.0f} points")
        print(f"   store {f['store_s']:.1f} s · digest from Redis {f['build_s']:.2f} s · "
              f"chart {f['chart_s']:.2f} s ({f['png_kib']:.0f} KiB) · "
              f"{f['wasting_hosts']:.0f} hosts flagged wasting")
        ttl, renew = 2.0, 0.5
        times = bench_takeover(server.url, args.trials, ttl, renew)
        print(f"3. takeover after the leader stops renewing (ttl {ttl} s, renew {renew} s, "
              f"bound {ttl + renew} s), {args.trials} trials:")
        print(f"   mean {statistics.fmean(times):.2f} s · max {max(times):.2f} s")
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps({
            "writes": {"pipelined_s": pipelined, "each_s": each, "probes": 300},
            "fleet": f, "takeover": {"times": times, "bound_s": ttl + renew}}, indent=2))


if __name__ == "__main__":
    main()
