"""Benchmark: a playbook over the paramiko pool vs the ways a person would run it.

One loopback sim host (seed scenario), the same commands each way:
  pool (warm)      run_playbook over a ParamikoPool already connected
  pool (cold)      the same with a fresh pool (connect and auth included)
  fresh ssh        one ``ssh host CMD`` process per command, one after another
  ControlMaster    one OpenSSH master; the commands multiplexed over it, one after
                   another and all at once (threads), master setup timed apart
and the pool's critical path: the GPU sampler's duration against the end of the last
other probe (the second round included), from a timeline of every command. The warm
runs' CPU is reported apart for the bot (this process) and the sim host (its sshd tree:
sessions and tool processes), since every way above pays the simulator the same.

The bot's CPU per warm diagnosis with the AES-GCM cipher it asks for and with paramiko's
own first choice (``cipher_ab.py``, alternated in the same run).

Then the fleet: 1, 32 and 128 hosts diagnosed at once through one pool, each with its
connect; wall time, the bot's own CPU-seconds per host (this process: the pool and the
playbooks) and the hosts' CPU (their sshd process trees) reported apart. Fleet hosts are
real sshds replaying one sim host's recorded answers (``bench/fleet_replay.py``), or
full sim hosts with ``--real-sims``. Each replayed size runs once more with every command
answered ``exit 0``: the hosts' sshds alone, the floor under any fan-out on these cores.

Usage: python bench/diagnose.py [--fleet 1,32,128] [--repeat 3] [--playbook vm_restart]
       [--json FILE]
Prints medians of --repeat runs, absolute and as ratios; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cipher_ab import cipher_ab
from common import diagnose, median_time, tree_cpu
from fleet import bench_fleet

from bot.domain.findings import ProbeResult
from bot.sim.sshd import SimHost, start_sim
from bot.ssh.base import Command, SSHRunner, SSHTarget
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings

SAMPLER = "gpus"


class Timeline:
    """An ``SSHRunner`` that records when each command started and ended."""

    def __init__(self, inner: SSHRunner) -> None:
        self.inner = inner
        self.rows: list[tuple[float, float, str]] = []
        self.t0 = time.monotonic()
        self._lock = threading.Lock()

    def run(self, target: SSHTarget, command: Command) -> ProbeResult:
        start = time.monotonic()
        result = self.inner.run(target, command)
        with self._lock:
            self.rows.append((start - self.t0, time.monotonic() - self.t0, command.name))
        return result

    def run_many(self, target: SSHTarget, commands: Sequence[Command]) -> list[ProbeResult]:
        return [self.run(target, c) for c in commands]

    def close(self) -> None:
        pass


def cold(host: SimHost, playbook: str) -> None:
    with ParamikoPool(SSHSettings.model_validate({})) as pool:
        diagnose(pool, host, playbook)


def run_ssh(argv: list[str]) -> None:
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120, check=False)


def ssh_commands(host: SimHost, commands: list[str], extra: list[str] | None = None,
                 parallel: bool = False) -> None:
    argvs = [host.ssh_argv(c) for c in commands]
    argvs = [a[:1] + (extra or []) + a[1:] for a in argvs]
    if not parallel:
        for argv in argvs:
            run_ssh(argv)
        return
    with ThreadPoolExecutor(len(argvs)) as ex:
        list(ex.map(run_ssh, argvs))


class ControlMaster:
    """One OpenSSH master connection; commands multiplex over its socket."""

    def __init__(self, host: SimHost) -> None:
        self.host = host
        self.dir = tempfile.mkdtemp(prefix="ib-cm-")
        self.opts = ["-o", f"ControlPath={self.dir}/cm", "-o", "ControlMaster=auto",
                     "-o", "ControlPersist=120"]

    def start(self) -> None:
        argv = self.host.ssh_argv("true")
        run_ssh(argv[:1] + self.opts + argv[1:])  # the first call leaves the master running

    def stop(self) -> None:
        argv = self.host.ssh_argv("true")
        run_ssh(argv[:1] + self.opts + ["-O", "exit"] + argv[1:-1])


def critical_path(pool: ParamikoPool, host: SimHost, playbook: str) -> dict[str, float]:
    """One warm run's timeline: the sampler's span and the last other probe's end."""
    timeline = Timeline(pool)
    diagnose(timeline, host, playbook)
    total = time.monotonic() - timeline.t0
    sampler = [end - start for start, end, name in timeline.rows if name == SAMPLER]
    others = [end for _, end, name in timeline.rows if name != SAMPLER]
    return {"total": total, "sampler": sampler[0] if sampler else 0.0,
            "others_end": max(others, default=0.0), "probes": float(len(timeline.rows))}


def bench_one(host: SimHost, playbook: str, repeat: int) -> dict[str, float]:
    with ParamikoPool(SSHSettings.model_validate({})) as pool:
        commands = [p.command for p in diagnose(pool, host, playbook).probes]
        sim0, bot0 = tree_cpu(host.pid), time.process_time()
        warm = median_time(lambda: diagnose(pool, host, playbook), repeat)
        sim_cpu, bot_cpu = tree_cpu(host.pid) - sim0, time.process_time() - bot0
        path = critical_path(pool, host, playbook)
    cm = ControlMaster(host)
    cm_setup = median_time(cm.start, 1)
    try:
        cm_seq = median_time(lambda: ssh_commands(host, commands, cm.opts), repeat)
        cm_par = median_time(lambda: ssh_commands(host, commands, cm.opts, parallel=True),
                             repeat)
    finally:
        cm.stop()
    return {"commands": float(len(commands)), "pool_warm": warm,
            "pool_cold": median_time(lambda: cold(host, playbook), repeat),
            "ssh_sequential": median_time(lambda: ssh_commands(host, commands), repeat),
            "controlmaster_setup": cm_setup, "controlmaster_sequential": cm_seq,
            "controlmaster_parallel": cm_par, "warm_sim_cpu_s": sim_cpu / repeat,
            "warm_bot_cpu_s": bot_cpu / repeat, **{f"path_{k}": v for k, v in path.items()},
            **cipher_ab(host, playbook)}


def report_one(one: dict[str, float]) -> None:
    print(f"\none host, {int(one['commands'])} commands (median seconds)")
    for key in ("pool_warm", "pool_cold", "ssh_sequential", "controlmaster_setup",
                "controlmaster_sequential", "controlmaster_parallel"):
        print(f"  {key:<26}{one[key]:8.3f}")
    seq = one["ssh_sequential"]
    print(f"  fresh ssh / pool (warm)              {seq / one['pool_warm']:6.2f}x   aim >= 5x")
    print(f"  fresh ssh / pool (cold)              {seq / one['pool_cold']:6.2f}x")
    print(f"  ControlMaster parallel / pool (warm) "
          f"{one['controlmaster_parallel'] / one['pool_warm']:6.2f}x   aim >= 1x")
    print(f"  ControlMaster sequential / pool (warm) "
          f"{one['controlmaster_sequential'] / one['pool_warm']:5.2f}x")
    n = one["commands"]
    print(f"  CPU per warm run: bot {one['warm_bot_cpu_s']:.3f} s; sim host (sshd, its "
          f"sessions and tools: the simulator's cost, not the bot's) {one['warm_sim_cpu_s']:.3f}"
          f" s, {one['warm_sim_cpu_s'] / n * 1000:.0f} ms a command")
    print(f"  bot CPU per warm diagnosis: AES-GCM (ours) {1000 * one['cpu_aead_s']:.1f} ms, "
          f"paramiko's aes128-ctr + hmac-sha2-256 {1000 * one['cpu_ctr_hmac_s']:.1f} ms "
          f"({one['cpu_ctr_hmac_s'] / one['cpu_aead_s']:.2f}x)")
    print(f"  critical path (one warm run, {int(one['path_probes'])} commands): total "
          f"{one['path_total']:.3f} s; GPU sampler {one['path_sampler']:.3f} s from the start; "
          f"last other probe (second round included) ends at {one['path_others_end']:.3f} s",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--fleet", default="1,32,128", help="host counts, comma separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--playbook", default="vm_restart")
    ap.add_argument("--real-sims", action="store_true",
                    help="fleet of full sim hosts (a Python process per tool call) instead of "
                         "recorded answers replayed over real sshds")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.playbook} on seed sim hosts; {os.cpu_count()} CPUs, load average {load}")
    host = start_sim("seed")
    try:
        one = bench_one(host, args.playbook, args.repeat)
    finally:
        host.stop()
    report_one(one)
    sizes = [int(x) for x in args.fleet.split(",") if x]
    kind = "full sim hosts" if args.real_sims else "replaying hosts"
    print(f"\nfleet: all hosts at once through one fresh pool ({args.playbook}, {kind})")
    fleet = bench_fleet(sizes, args.playbook, not args.real_sims) if sizes else []
    if args.json:
        results: dict[str, Any] = {"one": one, "fleet": fleet, "playbook": args.playbook,
                                   "fleet_hosts": "sim" if args.real_sims else "replay"}
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
