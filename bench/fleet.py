"""The fleet fan-out: 1, 32 and 128 hosts diagnosed at once through one fresh pool (see
``diagnose.py``'s docstring), the bot's CPU reported apart from the hosts'."""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import diagnose, tree_cpu
from fleet_replay import null_on, recorded, replay_on, start_recording

from bot.domain.findings import DiagnosisStatus
from bot.sim.sshd import SimHost, start_sim
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from playbooks import PlaybookOptions

# The fleet run overloads a small machine (many sshds, a Python process per SSH command and
# per sim tool call): generous deadlines there, so it measures time, not how deadlines fail.
FLEET_SSH = SSHSettings.model_validate({"connect_timeout_s": 120})
FLEET_OPTIONS = PlaybookOptions(command_timeout_s=120)
IDLE_S = 2.0
ONE_HOST_RUNS = 5  # the 1-host row is every ratio's base: a median, not one ~50 ms sample


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
