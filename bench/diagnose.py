"""Benchmark: the vm_restart playbook over the paramiko pool vs the way the story did it.

Side by side on one loopback sim host (seed scenario):
  pool        run_playbook over ParamikoPool (cold: connect included; warm: reused pool)
  ssh         the same commands, one ``ssh host CMD`` process each, one after another
  controlmaster  the same commands, one after another, multiplexed over one OpenSSH master
Then N sim hosts at once (default 32) through one pool against one host.

Usage: python bench/diagnose.py [--hosts 32] [--repeat 3] [--playbook vm_restart]
Prints absolute times (median of --repeat runs) and the ratios; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bot.config.settings import SSHSettings
from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.sim.sshd import SimHost, start_sim
from bot.ssh.pool import ParamikoPool
from playbooks import PlaybookOptions, run_playbook


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# The fleet run overloads a small machine (32 sshds, a Python process per sim tool call):
# generous deadlines there, so it measures time rather than how deadlines fail.
FLEET_SSH = SSHSettings.model_validate({"connect_timeout_s": 60})
FLEET_OPTIONS = PlaybookOptions(command_timeout_s=60)


def diagnose(pool: ParamikoPool, host: SimHost, playbook: str,
             options: PlaybookOptions | None = None) -> Diagnosis:
    """Run it; say which probes failed when it was not a clean ``ok``."""
    d = run_playbook(pool, host.ssh_target(), playbook, options=options)
    if d.status is DiagnosisStatus.UNREACHABLE:
        print(f"  note: {host.name}:{host.port} unreachable: {d.findings[0].title}")
    for p in d.probes:
        if p.timed_out or p.error:
            print(f"  note: {host.name}:{host.port} probe {p.name} "
                  f"{'timed out' if p.timed_out else p.error} after {p.duration_s:.1f} s")
    return d


def cold(host: SimHost, playbook: str, settings: SSHSettings | None = None,
         options: PlaybookOptions | None = None) -> None:
    with ParamikoPool(settings or SSHSettings.model_validate({})) as pool:
        diagnose(pool, host, playbook, options)


def run_ssh(argv: list[str]) -> None:
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60, check=False)


def sequential_ssh(host: SimHost, commands: list[str], extra: list[str] | None = None) -> None:
    for command in commands:
        argv = host.ssh_argv(command)
        run_ssh(argv[:1] + (extra or []) + argv[1:])


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
        exit_argv = argv[:1] + self.opts + ["-O", "exit"] + argv[1:-1]
        run_ssh(exit_argv)


def bench_one(host: SimHost, playbook: str, repeat: int) -> dict[str, float]:
    with ParamikoPool(SSHSettings.model_validate({})) as pool:
        commands = [p.command for p in diagnose(pool, host, playbook).probes]
        warm = median_time(lambda: diagnose(pool, host, playbook), repeat)
    cm = ControlMaster(host)
    cm_setup = median_time(cm.start, 1)
    try:
        cm_time = median_time(lambda: sequential_ssh(host, commands, cm.opts), repeat)
    finally:
        cm.stop()
    return {**_no_window(host, playbook, repeat),
        "commands": float(len(commands)),
        "pool_cold": median_time(lambda: cold(host, playbook), repeat),
        "pool_warm": warm,
        "ssh_sequential": median_time(lambda: sequential_ssh(host, commands), repeat),
        "controlmaster_setup": cm_setup,
        "controlmaster": cm_time,
    }


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _no_window(host: SimHost, playbook: str, repeat: int) -> dict[str, float]:
    """The same with one GPU sample (no sampling window): the executor's parallelism alone."""
    one = PlaybookOptions(samples=1)
    with ParamikoPool(SSHSettings.model_validate({})) as pool:
        commands = [p.command for p in diagnose(pool, host, playbook, one).probes]
        warm = median_time(lambda: diagnose(pool, host, playbook, one), repeat)
    return {"pool_warm_1_sample": warm,
            "ssh_sequential_1_sample": median_time(lambda: sequential_ssh(host, commands), repeat)}


def bench_many(hosts: list[SimHost], playbook: str) -> dict[str, float]:
    """One host, then all hosts at once, each with a fresh pool (connects included); also
    how busy the machine's CPUs were and how much CPU the bot itself used."""
    one = median_time(lambda: cold(hosts[0], playbook, FLEET_SSH, FLEET_OPTIONS), 2)
    busy0, total0 = cpu_busy()
    cpu0 = time.process_time()
    with ParamikoPool(FLEET_SSH) as pool, ThreadPoolExecutor(len(hosts)) as ex:
        start = time.perf_counter()
        done = list(ex.map(lambda h: diagnose(pool, h, playbook, FLEET_OPTIONS), hosts))
        many = time.perf_counter() - start
    ok = sum(d.status is DiagnosisStatus.OK for d in done)
    busy1, total1 = cpu_busy()
    return {"one": one, "many": many, "ok": ok, "bot_cpu": time.process_time() - cpu0,
            "machine_busy": (busy1 - busy0) / max(total1 - total0, 1.0)}


def report_one(one: dict[str, float]) -> None:
    print(f"\none host, {int(one['commands'])} commands (median seconds)")
    for key in ("pool_cold", "pool_warm", "ssh_sequential", "controlmaster_setup",
                "controlmaster"):
        print(f"  {key:<22}{one[key]:8.3f}")
    seq_ratio = one["ssh_sequential"] / one["pool_cold"]
    cm_ratio = one["controlmaster"] / one["pool_warm"]
    print(f"  sequential ssh / pool (cold)     {seq_ratio:6.2f}x   aim >= 5x")
    print(f"  ControlMaster / pool (warm)      {cm_ratio:6.2f}x   aim >= 1x")
    cm_cold = (one["controlmaster"] + one["controlmaster_setup"]) / one["pool_cold"]
    print(f"  ControlMaster+setup / pool (cold) {cm_cold:5.2f}x")
    bare = one["ssh_sequential_1_sample"] / one["pool_warm_1_sample"]
    print(f"  one GPU sample (no window): pool (warm) {one['pool_warm_1_sample']:.3f}, "
          f"sequential ssh {one['ssh_sequential_1_sample']:.3f}, ratio {bare:.2f}x", flush=True)


def report_fleet(n: int, fleet: dict[str, float]) -> None:
    single, many = fleet["one"], fleet["many"]
    print(f"\n{n} hosts at once vs one host (fresh pool each, seconds)")
    print(f"  one host {single:8.3f}   {n} hosts {many:8.3f}   ratio {many / single:5.2f}x"
          f"   aim < 3x   ({fleet['ok']:.0f}/{n} diagnoses ok)")
    print(f"  during the {n}-host run: CPUs {100 * fleet['machine_busy']:.0f}% busy, "
          f"the bot used {fleet['bot_cpu']:.1f} CPU-s of {many * (os.cpu_count() or 1):.1f}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"  machine: {os.cpu_count()} CPUs, load average {load}; every sim tool call is a "
          "Python process")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--playbook", default="vm_restart")
    args = ap.parse_args()
    hosts: list[SimHost] = []
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{args.playbook} on seed sim hosts; {os.cpu_count()} CPUs, load average {load}")
    try:
        hosts.append(start_sim("seed"))
        report_one(bench_one(hosts[0], args.playbook, args.repeat))
        start = time.perf_counter()
        while len(hosts) < args.hosts:
            hosts.append(start_sim("seed"))
        print(f"started {args.hosts} sim hosts in {time.perf_counter() - start:.1f} s")
        report_fleet(len(hosts), bench_many(hosts, args.playbook))
    finally:
        for host in hosts:
            host.stop()


if __name__ == "__main__":
    main()
