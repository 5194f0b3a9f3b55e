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
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cipher_ab import cipher_ab
from fleet_replay import null_on, recorded, replay_on, start_recording

from bot.domain.findings import Diagnosis, DiagnosisStatus, ProbeResult
from bot.sim.sshd import SimHost, start_sim
from bot.ssh.base import Command, SSHRunner, SSHTarget
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from playbooks import PlaybookOptions, run_playbook

# The fleet run overloads a small machine (many sshds, a Python process per SSH command and
# per sim tool call): generous deadlines there, so it measures time, not how deadlines fail.
FLEET_SSH = SSHSettings.model_validate({"connect_timeout_s": 120})
FLEET_OPTIONS = PlaybookOptions(command_timeout_s=120)
SAMPLER = "gpus"
IDLE_S = 2.0
ONE_HOST_RUNS = 5  # the 1-host row is every ratio's base: a median, not one ~50 ms sample


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def diagnose(runner: SSHRunner, host: SimHost, playbook: str,
             options: PlaybookOptions | None = None) -> Diagnosis:
    """Run it; say which probes failed when it was not a clean ``ok``."""
    d = run_playbook(runner, host.ssh_target(), playbook, options=options)
    if d.status is DiagnosisStatus.UNREACHABLE:
        print(f"  note: {host.name}:{host.port} unreachable: {d.findings[0].title}")
    for p in d.probes:
        if p.timed_out or p.error:
            print(f"  note: {host.name}:{host.port} probe {p.name} "
                  f"{'timed out' if p.timed_out else p.error} after {p.duration_s:.1f} s")
    return d


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


def tree_cpu(root: int) -> float:
    """CPU-seconds of ``root`` and its live descendants (reaped children included)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    todo, total = [root], 0
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += [p for p, pp in parent.items() if pp == pid]
    return total / os.sysconf("SC_CLK_TCK")


def fleet_run(hosts: list[SimHost], playbook: str) -> dict[str, float]:
    """All ``hosts`` at once through one fresh pool (connects included)."""
    sims0 = sum(tree_cpu(h.pid) for h in hosts)
    cpu0 = time.process_time()
    start = time.perf_counter()
    with ParamikoPool(FLEET_SSH) as pool, ThreadPoolExecutor(len(hosts)) as ex:
        done = list(ex.map(lambda h: diagnose(pool, h, playbook, FLEET_OPTIONS), hosts))
        wall = time.perf_counter() - start
        bot = time.process_time() - cpu0
        idle = idle_cpu(IDLE_S)  # the pool holding every connection, nothing to do
    sims = sum(tree_cpu(h.pid) for h in hosts) - sims0
    n = len(hosts)
    return {"hosts": n, "wall_s": wall, "ok": sum(d.status is DiagnosisStatus.OK for d in done),
            "bot_cpu_s": bot, "bot_cpu_per_host_s": bot / n, "sim_cpu_s": sims,
            "sim_cpu_per_host_s": sims / n, "cpu_floor_s": cpu_floor(bot, sims),
            "idle_cpu_ms_per_s": 1000 * idle}


def idle_cpu(seconds: float) -> float:
    """This process's CPU-seconds per second while it only waits."""
    cpu0, start = time.process_time(), time.perf_counter()
    time.sleep(seconds)
    return (time.process_time() - cpu0) / (time.perf_counter() - start)


def cpu_floor(bot_cpu_s: float, sim_cpu_s: float) -> float:
    """The least wall time these cores allow for the CPU both sides used (other load on
    the machine not counted): no fan-out code can finish a fleet faster than this."""
    return (bot_cpu_s + sim_cpu_s) / (os.cpu_count() or 1)


def sshd_only(hosts: list[SimHost], playbook: str, rec: Path) -> dict[str, float]:
    """The same fan-out with every command answered ``exit 0`` at once (``null_on``):
    what the hosts' sshds alone cost, with connects and sessions but no command."""
    for host in hosts:
        null_on(host)
    try:
        return fleet_run(hosts, playbook)
    finally:
        for host in hosts:
            replay_on(host, rec)


def bench_fleet(sizes: list[int], playbook: str, replay: bool) -> list[dict[str, float]]:
    """With ``replay``, one real sim host answers once, recorded; every fleet host then
    replays those answers (``fleet_replay``): real sshd and SSH, no simulator CPU."""
    hosts: list[SimHost] = []
    out = []
    try:
        rec = None
        if replay:
            hosts.append(start_sim("seed"))
            rec = start_recording(hosts[0])
            fleet_run(hosts[:1], playbook)
            replay_on(hosts[0], rec)
            print(f"  recorded {recorded(rec)} sessions from one sim host; fleet hosts replay "
                  "them (same output and per-command time, no simulator CPU)", flush=True)
        for n in sizes:
            started = time.perf_counter()
            while len(hosts) < n:
                hosts.append(start_sim("seed"))
                if rec is not None:
                    replay_on(hosts[-1], rec)
            print(f"  {n} hosts up ({time.perf_counter() - started:.1f} s to start)", flush=True)
            runs = [fleet_run(hosts[:n], playbook) for _ in range(ONE_HOST_RUNS if n == 1 else 1)]
            out.append({k: statistics.median(r[k] for r in runs) for k in runs[0]})
            if rec is not None:
                null = sshd_only(hosts[:n], playbook, rec)
                out[-1] |= {"sshd_only_cpu_s": null["sim_cpu_s"],
                            "sshd_only_cpu_per_host_s": null["sim_cpu_per_host_s"]}
            report_fleet_row(out[-1], out[0])
    finally:
        for host in hosts:
            host.stop()
    return out


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


def report_fleet_row(row: dict[str, float], first: dict[str, float]) -> None:
    print(f"  {row['hosts']:>4.0f} hosts: wall {row['wall_s']:7.2f} s "
          f"({row['wall_s'] / first['wall_s']:5.2f}x one host), {row['ok']:.0f} ok; bot "
          f"{row['bot_cpu_per_host_s']:.3f} CPU-s/host ({row['bot_cpu_s']:.1f} total); "
          f"sim hosts {row['sim_cpu_per_host_s']:.3f} CPU-s/host ({row['sim_cpu_s']:.1f} total); "
          f"the idle pool afterwards {row['idle_cpu_ms_per_s']:.1f} ms CPU/s", flush=True)
    floor = max(row["cpu_floor_s"], first["wall_s"])
    print(f"        CPU floor {row['cpu_floor_s']:.2f} s (bot + hosts over {os.cpu_count()} "
          f"cores): at best {floor / first['wall_s']:.2f}x one host here; measured "
          f"{row['wall_s'] / floor:.2f}x that floor", flush=True)
    if "sshd_only_cpu_s" in row:
        least = cpu_floor(row["bot_cpu_s"], row["sshd_only_cpu_s"])
        print(f"        sshd alone (every command answered exit 0): hosts "
              f"{row['sshd_only_cpu_per_host_s']:.3f} CPU-s/host; with the bot's CPU these cores "
              f"need {least:.2f} s = {least / first['wall_s']:.2f}x one host before any command "
              "runs", flush=True)


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
