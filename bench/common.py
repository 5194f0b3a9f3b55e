"""What the SSH benchmarks share: a median of wall times, one diagnosis that says which
probes failed, and a process tree's CPU-seconds read from /proc."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.sim.sshd import SimHost
from bot.ssh.base import SSHRunner
from playbooks import PlaybookOptions, run_playbook


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median wall seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
