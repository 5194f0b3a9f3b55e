"""Benchmark: each level of the health gate on a simulated host, and the gate as a whole
against the readings level alone (what the gate before issue 36 amounted to: one reading).

One loopback sim host (``healthy`` with DCGM installed), a warm pool; each run is the full
graded gate (readings, ``dcgmi diag -r 1`` then ``-r 2``, the CUDA smoke) and each level's
duration is the gate's own record. A sim host answers DCGM and the smoke at once: these
figures are what our side costs (SSH, parsing, the probes of level 1), not what DCGM or a
GPU take (a real ``dcgmi diag -r 2`` takes about two minutes; docs/health-gate.md).

Usage: python bench/gate_levels.py [--repeat 5] [--json FILE]
Prints medians and p90 per level and the whole gate's ratio to level 1 alone; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from bot.sim.sshd import start_sim
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from playbooks import PlaybookOptions
from playbooks.health_gate import GateLevel, GatePolicy, run_gate

OPTIONS = PlaybookOptions(expected_gpus=8)  # the diagnosis's default sampling (3 × 0.25 s)


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    host = start_sim("healthy", overrides={"dcgm": {"installed": True}})
    per_level: dict[str, list[float]] = {lv.value: [] for lv in GateLevel}
    whole: list[float] = []
    alone: list[float] = []
    try:
        with ParamikoPool(SSHSettings.model_validate({})) as pool:
            target = host.ssh_target()
            run_gate(pool, target, options=OPTIONS)  # connect and warm up
            for _ in range(args.repeat):
                start = time.perf_counter()
                gate = run_gate(pool, target, options=OPTIONS, since=time.time() - 60)
                whole.append(time.perf_counter() - start)
                assert gate.passed, gate.reasons
                for level in gate.levels:
                    per_level[level.level.value].append(level.duration_s)
                start = time.perf_counter()
                run_gate(pool, target, options=OPTIONS,
                         policy=GatePolicy(levels=(GateLevel.READINGS,)))
                alone.append(time.perf_counter() - start)
    finally:
        host.stop()
    rows: dict[str, Any] = {
        name: {"median_s": statistics.median(v), "p90_s": p90(v), "runs": len(v)}
        for name, v in per_level.items()}
    rows["gate"] = {"median_s": statistics.median(whole), "p90_s": p90(whole), "runs": len(whole)}
    rows["readings_alone"] = {"median_s": statistics.median(alone), "p90_s": p90(alone),
                              "runs": len(alone)}
    ratio = rows["gate"]["median_s"] / rows["readings_alone"]["median_s"]
    for name, row in rows.items():
        print(f"{name:16} median {row['median_s']:.3f} s  p90 {row['p90_s']:.3f} s  "
              f"({row['runs']} runs)")
    print(f"whole gate / readings alone: {ratio:.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({**rows, "ratio": ratio}, fh, indent=2)


if __name__ == "__main__":
    main()
