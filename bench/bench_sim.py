"""Simulated hosts: start-up cost, 32 hosts at once, and per-command latency, measured
side by side in one run.

    python bench/bench_sim.py [--hosts 32]

Prints: seconds per host started one after another and 32 at once (threads); an
OpenSSH client round trip with the sim's key exchange vs the sntrup761 default it
disables; one paramiko connection running commands over channels; what one sim tool
command costs in CPU (its shim run directly, no SSH) next to the bare interpreter it
starts, so a reader can tell the simulator's share of a probe from the bot's.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import median_time

from bot.sim.sshd import SimHost, start_sim


def bench_start(n_hosts: int, root: Path) -> tuple[float, float, list[SimHost]]:
    seq: list[SimHost] = []
    took: list[float] = []
    for i in range(8):  # one after another, each timed on its own: a real median of 8
        t = time.perf_counter()
        seq.append(start_sim("seed", workdir=root / f"seq{i}"))
        took.append(time.perf_counter() - t)
    per_seq = statistics.median(took)
    for h in seq:
        h.stop()
    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n_hosts) as pool:
        hosts = list(pool.map(lambda i: start_sim("seed", workdir=root / f"par{i}"),
                              range(n_hosts)))
    wall = time.perf_counter() - t
    return per_seq, wall, hosts


def ssh_round_trip(host: SimHost, extra: list[str]) -> float:
    argv = host.ssh_argv("true")
    argv[1:1] = extra
    return median_time(lambda: subprocess.run(argv, capture_output=True, check=True), 5)


def paramiko_channels(host: SimHost) -> tuple[float, float, float]:
    import paramiko

    client = paramiko.SSHClient()
    client.load_host_keys(str(host.known_hosts_path))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    t = time.perf_counter()
    client.connect("127.0.0.1", port=host.port, username=host.user,
                   key_filename=str(host.key_path), look_for_keys=False, allow_agent=False)
    connect = time.perf_counter() - t

    def run(cmd: str) -> None:
        _, out, _ = client.exec_command(cmd)
        out.read()
        out.channel.recv_exit_status()

    shell = median_time(lambda: run("true"), 7)
    smi = median_time(lambda: run("nvidia-smi --query-gpu=index,memory.used --format=csv"), 7)
    client.close()
    return connect, shell, smi


def cpu_per_call(argv: list[str], n: int = 20) -> float:
    """Mean CPU-seconds (user + sys, children) of one ``argv`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n):
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / n


def tool_costs(host: SimHost) -> dict[str, float]:
    """CPU of sim tool commands as the diagnosis sends them, and the interpreter floor."""
    bindir = host.workdir / "bin"
    query = ["--query-gpu=index,memory.used,memory.total,utilization.gpu",
             "--format=csv,noheader,nounits"]
    return {
        "interpreter_cpu_s": cpu_per_call([sys.executable, "-I", "-S", "-c", "pass"]),
        "nvidia_smi_query_cpu_s": cpu_per_call([str(bindir / "nvidia-smi"), *query]),
        "nvidia_smi_xml_cpu_s": cpu_per_call([str(bindir / "nvidia-smi"), "-q", "-x"]),
        "ps_cpu_s": cpu_per_call([str(bindir / "ps"), "-ww", "-eo", "pid,ppid,user,args"]),
        "systemctl_show_cpu_s": cpu_per_call([str(bindir / "systemctl"), "show", "-p",
                                              "Id,ActiveState", "vllm-kimi-k25-int4.service"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        per_seq, wall, hosts = bench_start(args.hosts, Path(tmp))
        try:
            alive = sum(h.alive() for h in hosts)
            results |= {"start_one_s": per_seq, "start_many_s": wall, "hosts": args.hosts,
                        "alive": alive}
            print(f"start one host (sequential, median of 8): {per_seq * 1000:.0f} ms")
            print(f"start {args.hosts} hosts at once: {wall:.2f} s wall, {alive} alive, "
                  f"{wall / args.hosts * 1000:.0f} ms/host")
            for h in hosts[2:]:
                h.stop()
            pq = start_sim("seed", workdir=Path(tmp) / "pq",
                           overrides={"sshd": {"fast_kex": False}})
            hosts.append(pq)
            fast, slow = ssh_round_trip(hosts[0], []), ssh_round_trip(pq, [])
            print(f"OpenSSH client round trip `true`: {fast * 1000:.0f} ms (sim: curve25519) vs "
                  f"{slow * 1000:.0f} ms (sshd default: sntrup761) -> x{slow / fast:.2f}")
            results |= {"ssh_fast_kex_s": fast, "ssh_default_kex_s": slow}
            connect, shell, smi = paramiko_channels(hosts[1])
            print(f"paramiko: connect {connect * 1000:.0f} ms; per channel `true` "
                  f"{shell * 1000:.0f} ms, nvidia-smi query {smi * 1000:.0f} ms")
            costs = tool_costs(hosts[1])
            results |= {"paramiko_connect_s": connect, "channel_true_s": shell,
                        "channel_smi_s": smi, **costs}
            print("sim tool CPU per command (shim run directly, mean of 20): " + ", ".join(
                f"{k.removesuffix('_cpu_s')} {v * 1000:.1f} ms" for k, v in costs.items()))
        finally:
            for h in hosts:
                h.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
