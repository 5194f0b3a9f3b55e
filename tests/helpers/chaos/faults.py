"""The faults a chaos run injects, each with its heal, and the seeded schedule of them.

Every fault is real: a signal to a real process (Redis, a ``serve`` replica, a host's
sshd and everything under it), a real ``redis-server`` refusing writes, Redis restarted
without its data, the Slack stand-in failing or answering late, a host that comes back
with another host key, latency on the path to a host. One fault at a time: each starts
at a seeded moment, lasts a seeded while, and is healed before the next begins.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.sim.sshd import freeze, host_processes, restart_sshd, thaw, use_host_key
from tests.helpers.chaos.world import World

Heal = Callable[[], None]

# kind → weight: how often the scheduler picks it
KINDS: dict[str, int] = {
    "redis_kill": 3, "redis_stop": 2, "redis_wipe": 1, "redis_oom": 2, "redis_readonly": 1,
    "replica_kill": 3, "replica_stop": 2, "sshd_kill": 2, "host_freeze": 2,
    "slack_500": 2, "slack_429": 2, "slack_timeout": 1, "host_key_swap": 1, "net_delay": 2,
}
HOST_KINDS = ("sshd_", "host_", "net_")  # the faults aimed at one host (their target names it)


@dataclass
class Fault:
    """One injected fault: what, on which target, from when to when (both clocks)."""

    kind: str
    target: str
    duration_s: float
    started: float = 0.0  # monotonic
    healed: float = 0.0
    started_wall: float = 0.0
    healed_wall: float = 0.0
    note: str = ""

    def line(self) -> str:
        return f"{self.kind}({self.target}) for {self.healed - self.started:.1f}s"

    def holds_up(self, host: str) -> bool:
        """Whether this fault could hold up an incident on ``host``: one on the ground every
        incident shares (Redis, a ``serve`` replica, Slack), or one on this host. Another
        host's sshd, freeze, key or latency is not in this incident's way."""
        return not self.kind.startswith(HOST_KINDS) or self.target == host


def quiet_since(faults: list[Fault], host: str) -> float | None:
    """When the last fault that could hold up an incident on ``host`` healed (monotonic; 0.0
    before any began), None while one is still active: a bound counted from it has not
    started. Read while the fault thread runs: it writes each time as one float (``started``
    before it injects, ``healed`` after it heals), so no lock is needed."""
    last = 0.0
    for fault in faults:
        if not fault.started or not fault.holds_up(host):
            continue
        if not fault.healed:
            return None
        last = max(last, fault.healed)
    return last


@dataclass
class Schedule:
    """``n`` faults at seeded moments within ``window_s`` (one at a time)."""

    seed: int
    faults: list[Fault] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)  # seconds after the run began

    @classmethod
    def plan(cls, seed: int, n: int, window_s: float, hosts: list[str],
             replicas: int) -> Schedule:
        rng = random.Random(seed)
        kinds = list(KINDS)
        weights = [KINDS[k] for k in kinds]
        out = cls(seed)
        for _ in range(n):
            kind = rng.choices(kinds, weights)[0]
            target = _target(rng, kind, hosts, replicas)
            out.faults.append(Fault(kind, target, round(rng.uniform(2.0, 9.0), 1)))
        out.starts = sorted(round(rng.uniform(0, window_s), 1) for _ in range(n))
        return out


def _target(rng: random.Random, kind: str, hosts: list[str], replicas: int) -> str:
    if kind.startswith("replica_"):
        return f"serve{rng.randrange(replicas)}"
    if kind.startswith(HOST_KINDS):
        return rng.choice(hosts)
    return kind.split("_")[0]


def inject(world: World, fault: Fault) -> Heal:
    """Break the ground now; the callable heals it."""
    kind, target = fault.kind, fault.target
    return _INJECT[kind](world, target, fault)


def _redis_kill(world: World, _: str, fault: Fault) -> Heal:
    world.redis.kill()

    def heal() -> None:
        world.redis.start()  # same port, same directory: the AOF is read back

    return heal


def _redis_stop(world: World, _: str, fault: Fault) -> Heal:
    pid = _pid(world.redis.proc)
    os.kill(pid, signal.SIGSTOP)
    return lambda: os.kill(pid, signal.SIGCONT)


def _redis_wipe(world: World, _: str, fault: Fault) -> Heal:
    world.redis.wipe()
    fault.note = "Redis restarted without its data"
    return lambda: None  # nothing comes back: the bot must notice and go on


def _redis_oom(world: World, _: str, fault: Fault) -> Heal:
    world.redis_faults.fill("2mb")
    return world.redis_faults.lift_memory


def _redis_readonly(world: World, _: str, fault: Fault) -> Heal:
    world.redis_faults.read_only()
    return world.redis_faults.primary


def _replica_kill(world: World, target: str, fault: Fault) -> Heal:
    serve = world.serves[int(target.removeprefix("serve"))]
    serve.kill()

    def heal() -> None:
        serve.start(timeout_s=120)

    return heal


def _replica_stop(world: World, target: str, fault: Fault) -> Heal:
    serve = world.serves[int(target.removeprefix("serve"))]
    pid = _pid(serve.proc)
    os.kill(pid, signal.SIGSTOP)
    return lambda: os.kill(pid, signal.SIGCONT)


def _sshd_kill(world: World, target: str, fault: Fault) -> Heal:
    host = world.host(target)
    for pid in reversed(host_processes(host.sim)):
        _signal(pid, signal.SIGKILL)
    return lambda: restart_sshd(host.sim)


def _host_freeze(world: World, target: str, fault: Fault) -> Heal:
    host = world.host(target)
    freeze(host.sim)
    return lambda: thaw(host.sim)


def _slack_outage(status: int, retry_after: float | None) -> Callable[[World, str, Fault], Heal]:
    def inject_outage(world: World, _: str, fault: Fault) -> Heal:
        world.standin.outage(fault.duration_s, status=status, retry_after=retry_after)
        return lambda: world.standin.outage(0)

    return inject_outage


def _slack_timeout(world: World, _: str, fault: Fault) -> Heal:
    world.standin.slow(fault.duration_s, delay_s=12.0)  # past the bot's 10 s client timeout
    return lambda: world.standin.slow(0, 0)


def _host_key_swap(world: World, target: str, fault: Fault) -> Heal:
    host = world.host(target)
    restart_sshd(host.sim, new_host_key=True)

    def heal() -> None:
        use_host_key(host.sim, *host.host_key)
        restart_sshd(host.sim)

    return heal


def _net_delay(world: World, target: str, fault: Fault) -> Heal:
    proxy = world.host(target).proxy
    proxy.delay_s = 0.4

    def heal() -> None:
        proxy.delay_s = 0.0

    return heal


_INJECT: dict[str, Callable[[World, str, Fault], Heal]] = {
    "redis_kill": _redis_kill, "redis_stop": _redis_stop, "redis_wipe": _redis_wipe,
    "redis_oom": _redis_oom, "redis_readonly": _redis_readonly,
    "replica_kill": _replica_kill, "replica_stop": _replica_stop,
    "sshd_kill": _sshd_kill, "host_freeze": _host_freeze,
    "slack_500": _slack_outage(500, None), "slack_429": _slack_outage(429, 2.0),
    "slack_timeout": _slack_timeout, "host_key_swap": _host_key_swap, "net_delay": _net_delay,
}


def _pid(proc: object) -> int:
    pid = getattr(proc, "pid", 0)
    assert pid, "the process is not running"
    return int(pid)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def run_fault(world: World, fault: Fault, stop: Callable[[], bool]) -> None:
    """Inject, hold for its duration (or until ``stop``), heal; times kept on ``fault``."""
    fault.started, fault.started_wall = time.monotonic(), time.time()
    heal = inject(world, fault)
    end = fault.started + fault.duration_s
    while time.monotonic() < end and not stop():
        time.sleep(0.1)
    heal()
    fault.healed, fault.healed_wall = time.monotonic(), time.time()
