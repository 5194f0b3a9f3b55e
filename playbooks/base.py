"""Playbook building blocks: options, probes, the per-diagnosis session and the report.

A probe is a command (fixed text plus validated, quoted arguments) and a pure parser.
A ``Session`` runs probes in parallel over one ``SSHRunner`` and keeps every result as
evidence; rules are pure functions that add findings and actions to a ``Report``.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bot.domain.findings import Finding, ProbeResult, ProposedAction, Severity
from bot.domain.validate import DEFAULT_PREFIXES
from bot.domain.xid import DEFAULT_POLICY, XidPolicy
from bot.ssh.base import Command, SSHRunner, SSHTarget
from playbooks.text import printable

T = TypeVar("T")


@dataclass(frozen=True)
class PlaybookOptions:
    """Thresholds and windows; defaults keep a diagnosis around a second."""

    samples: int = 3
    sample_interval_s: float = 0.25
    idle_util_pct: int = 5  # at or below this in every sample: not doing work
    held_mib: int = 1024  # GPU memory above this counts as held
    boot_window_s: float = 300.0  # started this soon after boot: "at boot"
    recent_boot_s: float = 3600.0  # auto: booted this recently -> vm_restart
    disk_full_pct: float = 90.0
    inode_full_pct: float = 90.0
    shm_warn_bytes: int = 1 << 30
    journal_warn_bytes: int = 2 << 30
    journal_vacuum_size: str = "500M"
    command_timeout_s: float = 10.0
    du_timeout_s: float = 8.0
    expected_mounts: tuple[str, ...] = ()
    path_prefixes: tuple[str, ...] = DEFAULT_PREFIXES
    expected_gpus: int | None = None  # the inventory's ``hosts.*.gpus``: fewer is a finding
    pcie_replay_warn: int = 100  # PCIe replays since boot at or above this: degraded
    xid_policy: XidPolicy = DEFAULT_POLICY
    slurm_node: str | None = None  # the inventory's ``hosts.*.slurm_node``: drain it first
    nvlink_error_warn: int = 100  # a link's CRC/replay errors at or above this: degraded
    ib_flap_warn: int = 3  # an InfiniBand port that went down this often: flapping
    ib_symbol_warn: int = 100  # symbol errors on a port at or above this: a marginal link
    hot_c: int = 85  # a GPU at or above this temperature: degraded

    @property
    def window_s(self) -> float:
        return max(self.samples - 1, 0) * self.sample_interval_s


@dataclass(frozen=True)
class Probe(Generic[T]):
    """A named command and the pure parser for its stdout."""

    name: str
    command: str
    parse: Callable[[str], T]
    timeout_s: float | None = None
    required: bool = False  # its failure makes the diagnosis partial


def cmd(*argv: str) -> str:
    """Quote every argument: the only way probe arguments are joined into a command."""
    return " ".join(shlex.quote(a) for a in argv)


def action_id(host: str, kind: str, params: dict[str, str]) -> str:
    """Stable short id: the same proposal for the same host is the same action."""
    blob = json.dumps([host, kind, sorted(params.items())], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


@dataclass
class Report:
    """What rules produce: findings and proposed actions, deduplicated by code/id."""

    host: str
    findings: list[Finding] = field(default_factory=list)
    actions: list[ProposedAction] = field(default_factory=list)
    playbook: str | None = None  # set by ``auto`` to the playbook it picked

    def find(self, code: str, severity: Severity, title: str, detail: str = "",
             **evidence: Any) -> None:
        finding = Finding(code, severity, printable(title, 600), printable(detail, 2000), evidence)
        if all((f.code, f.title) != (finding.code, finding.title) for f in self.findings):
            self.findings.append(finding)

    def propose(self, kind: str, params: dict[str, str], reason: str, risk: str = "") -> None:
        aid = action_id(self.host, kind, params)
        if all(a.id != aid for a in self.actions):
            self.actions.append(ProposedAction(aid, kind, dict(params), reason, risk))


class Session:
    """Runs one diagnosis's probes on one host; thread-safe, keeps results in order run."""

    def __init__(self, runner: SSHRunner, target: SSHTarget, options: PlaybookOptions,
                 executor: ThreadPoolExecutor) -> None:
        self.runner, self.target, self.options = runner, target, options
        self._executor = executor
        self._lock = threading.Lock()
        self.results: list[ProbeResult] = []
        self.required_failed: list[str] = []
        self._started: dict[tuple[str, str], Future[Any]] = {}

    def submit(self, probe: Probe[T]) -> Future[tuple[ProbeResult, T]]:
        """Start ``probe`` once per session: the GPU view and a playbook that both ask
        for the same command (name and text) share one channel and one result."""
        key = (probe.name, probe.command)
        with self._lock:
            started = self._started.get(key)
            if started is None:
                started = self._started[key] = self._executor.submit(self._run, probe)
        return started

    def submit_many(self, probes: Mapping[str, Probe[Any]]
                    ) -> dict[str, Future[tuple[ProbeResult, Any]]]:
        """Start several probes at once, keyed by the caller's names."""
        return {key: self.submit(p) for key, p in probes.items()}

    @staticmethod
    def parsed(futures: Mapping[str, Future[tuple[ProbeResult, Any]]]) -> dict[str, Any]:
        """Wait for ``submit_many``'s futures; their parsed values by key."""
        return {key: f.result()[1] for key, f in futures.items()}

    def run(self, probe: Probe[T]) -> tuple[ProbeResult, T]:
        return self._run(probe)

    def _run(self, probe: Probe[T]) -> tuple[ProbeResult, T]:
        timeout = probe.timeout_s or self.options.command_timeout_s
        result = self.runner.run(self.target, Command(probe.name, probe.command, timeout))
        with self._lock:
            self.results.append(result)
            if probe.required and not result.ok:
                self.required_failed.append(probe.name)
        return result, probe.parse(result.stdout)

    @property
    def degraded(self) -> bool:
        """Some probe timed out or failed at transport level, or a required one failed."""
        return bool(self.required_failed) or any(r.timed_out or r.error for r in self.results)
