"""Periodic host samples for the digest: probe each host, store what came back.

The probe is injected (``probe(host) -> [(metric, value)]``) so the sampler is the same
whether readings come over SSH (``ssh_probe`` below), from the NVML agent, or a test.
One host failing never stops the others; its error is logged and counted.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from bot.core import metrics
from bot.ssh.base import Command, SSHError, SSHRunner, SSHTarget
from playbooks.commands import QUERY_GPU_COMMAND
from playbooks.parsers.disk import parse_df
from playbooks.parsers.nvidia import parse_query_gpu, rows_of
from storage.samples import SampleStore

log = logging.getLogger(__name__)

Reading = tuple[str, float]
Probe = Callable[[str], list[Reading]]
GPU_COMMAND = QUERY_GPU_COMMAND


class Sampler:
    def __init__(self, store: SampleStore, probe: Probe, hosts: Callable[[], Iterable[str]],
                 clock: Callable[[], float] = time.time, max_workers: int = 8) -> None:
        self.store, self.probe, self.hosts, self.clock = store, probe, hosts, clock
        self.max_workers = max_workers

    def sample_host(self, host: str) -> int:
        """Probe one host and store its readings at one timestamp; return how many."""
        readings = self.probe(host)
        stored = self.store.add_many(host, self.clock(), readings)
        metrics.SAMPLES_STORED.labels(host=host).inc(stored)
        return stored

    def sample_once(self) -> dict[str, int | str]:
        """Every host in parallel: ``{host: readings stored}`` or ``{host: "error: ..."}``."""
        hosts = sorted(set(self.hosts()))
        if not hosts:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(hosts))) as pool:
            futures = {h: pool.submit(self.sample_host, h) for h in hosts}
        out: dict[str, int | str] = {}
        for host, fut in futures.items():
            exc = fut.exception()
            if exc is None:
                out[host] = fut.result()
            else:
                log.warning("sampling %s failed: %s", host, exc)
                out[host] = f"error: {type(exc).__name__}: {exc}"
        return out

def readings_from(gpu_csv: str, df_text: str, mounts: Sequence[str]) -> list[Reading]:
    """Pure: nvidia-smi CSV and ``df -PT -B1`` output to metric readings."""
    out: list[Reading] = []
    for g in rows_of(parse_query_gpu(gpu_csv)):  # a tool error: no GPU readings
        if g.memory_used_mib is not None:
            out.append((f"gpu{g.index}.mem_used_mib", float(g.memory_used_mib)))
        if g.memory_total_mib is not None:
            out.append((f"gpu{g.index}.mem_total_mib", float(g.memory_total_mib)))
        if g.utilization_pct is not None:
            out.append((f"gpu{g.index}.util_pct", float(g.utilization_pct)))
    wanted = set(mounts)
    for fs in parse_df(df_text):
        if fs.mount in wanted and fs.used is not None and fs.size:
            out.append((f"disk:{fs.mount}.used_bytes", float(fs.used)))
            out.append((f"disk:{fs.mount}.size_bytes", float(fs.size)))
    return out


def ssh_probe(runner: SSHRunner, target_for: Callable[[str], SSHTarget],
              mounts_for: Callable[[str], Sequence[str]], timeout_s: float = 10.0) -> Probe:
    """A ``Probe`` over SSH: one ``nvidia-smi`` query and one ``df`` in parallel channels."""

    def probe(host: str) -> list[Reading]:
        mounts = list(mounts_for(host)) or ["/"]
        for m in mounts:
            if not m.startswith("/") or "\x00" in m:
                raise ValueError(f"{host}: not an absolute mount path: {m!r}")
        # every mount starts with "/", so none can be read as an option (no "--" needed)
        df = "df -PT -B1 " + " ".join(shlex.quote(m) for m in mounts)
        try:
            gpu, disk = runner.run_many(target_for(host), [
                Command("sample_gpus", GPU_COMMAND, timeout_s),
                Command("sample_disk", df, timeout_s),
            ])
        except SSHError as exc:
            metrics.SSH_ERRORS.labels(kind=exc.kind).inc()
            raise
        return readings_from(gpu.stdout if gpu.ok else "", disk.stdout, mounts)

    return probe
