"""One chaos run: start the world, drive ``incidents`` through it while ``faults`` are
injected on a seeded schedule, then check the history. The driver reads the faults as the
fault thread records them (its bounds count from the last heal in an incident's way).
Once the last fault has healed and every driver is done, the run waits for the chat
outbox to empty (every thread reply owed delivered, at Slack's pace) before the checker
reads what is still queued (invariant 7). Everything random comes from the seed (which
faults, on what, when and for how long; what the on-call does with each incident), so a
failing seed replays the same run (the processes' own timing aside)."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bot.domain.lifecycle import TRANSIENT
from storage.chat_outbox import ChatOutboxStore
from tests.helpers.chaos.checker import History, Violation, Watch, check
from tests.helpers.chaos.driver import Arming, Driver
from tests.helpers.chaos.faults import Fault, Schedule, run_fault
from tests.helpers.chaos.world import World
from tests.helpers.serve_process import CHANNEL

ROUND_S = 14.0  # one incident on one host: alert, message, diagnosis, click, action, resolve
FAULT_S = 7.0  # a fault's mean length plus the gap before the next
# Every incident is in one channel, and Slack takes about one post a second per channel
# (our shared budget holds the bot to it). An incident posts about four messages (its
# card, the evidence table, the action's result, the postmortem: 3.76 a piece in seed
# 4242's run), so incidents are spread to offer the channel at most 0.8 posts a second,
# the rest of its pace left for what the faults hold back (Slack down or slow, retries).
# Offered more than it can post (seed 4242's first run: 1.37 a second), the channel's
# backlog only grows and no bot could settle its replies in time.
POSTS_PER_INCIDENT = 4.0
CHANNEL_POSTS_S = 0.8
# the final wait for the chat outbox: a post a second (Slack's channel budget) with some
# room per item queued, and a minute for a backoff or a lease after the last fault
DRAIN_PER_ITEM_S = 1.2
DRAIN_GRACE_S = 60.0


@dataclass(frozen=True)
class ChaosPlan:
    seed: int
    incidents: int = 20
    faults: int = 10
    hosts: int = 4
    replicas: int = 2

    def window_s(self) -> float:
        """How long incidents and faults are spread over: whichever needs longer (the
        hosts' rounds, the faults one after another, or the channel's posts)."""
        rounds = math.ceil(self.incidents / self.hosts)
        return max(rounds * ROUND_S, self.faults * FAULT_S,
                   self.incidents * POSTS_PER_INCIDENT / CHANNEL_POSTS_S)


@dataclass
class Drain:
    """The chat outbox at the run's end: how many items were queued once every driver was
    done, how long the wait for it to empty took, and when it emptied."""

    queued: int = 0  # items queued when the wait began
    waited_s: float = 0.0
    # the last chat post or edit Slack took, seconds after the last fault healed (the
    # outbox empty by then); None when it was still not empty at the wait's bound
    after_fault_s: float | None = None

    def line(self) -> str:
        if self.after_fault_s is None:
            return (f"chat NOT drained: still queued {self.waited_s:.0f}s into the final "
                    f"wait ({self.queued} items when it began)")
        return (f"chat drained in {self.after_fault_s:.0f} s after the last fault "
                f"({self.queued} items queued when the drivers were done, "
                f"{self.waited_s:.0f} s wait)")


@dataclass
class ChaosReport:
    plan: ChaosPlan
    duration_s: float
    armings: list[Arming]
    faults: list[Fault]
    violations: list[Violation]
    claims: int = 0
    answers: Counter[int] = field(default_factory=Counter)
    drain: Drain = field(default_factory=Drain)

    def summary(self) -> str:
        kinds = Counter(f.kind for f in self.faults)
        outcomes = Counter(a.outcome or "?" for a in self.armings)
        decisions = Counter(a.decision for a in self.armings)
        lines = [
            f"chaos seed {self.plan.seed}: {len(self.armings)} incidents on {self.plan.hosts} "
            f"hosts, {len(self.faults)} faults, {self.plan.replicas} replicas, "
            f"{self.duration_s:.0f}s",
            "faults: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
            "on-call: " + ", ".join(f"{k} {n}" for k, n in sorted(decisions.items())),
            "last state seen: " + ", ".join(f"{k} {n}" for k, n in sorted(outcomes.items())),
            "answers: " + ", ".join(f"{k} {n}" for k, n in sorted(self.answers.items())),
            f"messages checked for Fixed/Resolved: {self.claims}",
            self.drain.line(),
            f"violations: {len(self.violations)}",
            *[f"  {v.line()}" for v in self.violations],
        ]
        return "\n".join(lines)


def run_chaos(plan: ChaosPlan, tmp: Path, log: bool = False) -> ChaosReport:
    started = time.monotonic()
    world = World.start(tmp, hosts=plan.hosts, replicas=plan.replicas)
    try:
        watch = Watch(world)
        watch.install()
        window = plan.window_s()
        schedule = Schedule.plan(plan.seed, plan.faults, window, [h.name for h in world.hosts],
                                 plan.replicas)
        driver = Driver(world, plan.seed, schedule.faults)
        begin = time.monotonic()
        faults = threading.Thread(target=_faults, args=(world, schedule, begin, log),
                                  name="chaos-faults", daemon=True)
        faults.start()
        rounds = math.ceil(plan.incidents / plan.hosts)
        pace = window / rounds
        hosts = [threading.Thread(target=_host, args=(driver, world, n, plan, begin, pace),
                                  name=f"chaos-{h.name}", daemon=True)
                 for n, h in enumerate(world.hosts)]
        for t in hosts:
            t.start()
        faults.join()
        for t in hosts:
            t.join(timeout=window + 600)
        driver.stop()
        _settle(world)
        drain = _drain(world, watch, max((f.healed for f in schedule.faults), default=begin))
        history = History(world, driver, schedule.faults, watch).gather()
        violations = check(history)
        dump(tmp / "history.json", history, violations)
        return ChaosReport(plan, time.monotonic() - started, driver.armings, schedule.faults,
                           violations, len(watch.claims),
                           Counter(code for _, code in driver.answers), drain)
    finally:
        world.stop()


def dump(path: Path, h: History, violations: list[Violation]) -> None:
    """The run's history as JSON, for reading a failure after the processes are gone."""
    shift = time.time() - time.monotonic()  # the stand-in's clock → wall time
    calls = [{"at": round(c.at + shift, 3), "method": c.method,
              **{k: c.params.get(k) for k in ("channel", "ts", "thread_ts", "text", "metadata")
                 if k in c.params}}
             for c in h.world.standin.calls if c.method.startswith(("chat.", "views."))]
    posted = [{"ts": m.get("ts"), "metadata": m.get("metadata"), "text": m.get("text")}
              for m in h.world.standin.top_level(CHANNEL)]
    path.write_text(json.dumps({
        "faults": [asdict(f) for f in h.faults], "armings": [asdict(a) for a in h.driver.armings],
        "posted": posted,
        "claims": [asdict(c) for c in h.watch.claims], "slack": calls,
        "violations": [v.line() for v in violations]}, indent=1, default=str))


def _host(driver: Driver, world: World, index: int, plan: ChaosPlan, begin: float,
          pace: float) -> None:
    """This host's incidents, each no earlier than its place in the window."""
    host = world.hosts[index]
    mine = list(range(index + 1, plan.incidents + 1, plan.hosts))
    for k, n in enumerate(mine):
        wait = begin + k * pace - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        driver.run_host(host, [n])


def _faults(world: World, schedule: Schedule, begin: float, log: bool) -> None:
    for start, fault in zip(schedule.starts, schedule.faults, strict=True):
        wait = begin + start - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        run_fault(world, fault, lambda: False)
        if log:
            print(f"  +{fault.started - begin:6.1f}s {fault.line()}", flush=True)
        time.sleep(0.5)


def _settle(world: World, timeout_s: float = 90.0) -> None:
    """After the last fault: wait until no incident is in a transient state."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not [i for i in world.store.list(open_only=True) if i.state in TRANSIENT]:
                return
        except Exception:
            pass
        time.sleep(0.5)


def _drain(world: World, watch: Watch, last_heal: float) -> Drain:
    """After the last fault and the drivers: wait until the chat outbox is empty, at most
    ``DRAIN_PER_ITEM_S`` per item then queued plus ``DRAIN_GRACE_S``. What is left after
    that is owed chat the bot did not deliver (the checker's invariant 7)."""
    began = time.monotonic()
    outbox = ChatOutboxStore(world.store.redis)
    queued = _queued(outbox)
    deadline = began + (queued or 0) * DRAIN_PER_ITEM_S + DRAIN_GRACE_S
    while True:
        try:
            empty = outbox.next_due() is None
        except Exception:  # Redis not answering: look again
            empty = False
        if empty or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    drain = Drain(queued or 0, time.monotonic() - began)
    if empty:
        drain.after_fault_s = max(0.0, watch.last_chat - last_heal)
    return drain


def _queued(outbox: ChatOutboxStore) -> int | None:
    """Items queued in the chat outbox now, every incident's together (None: no answer)."""
    try:
        owners = outbox.due_incidents(math.inf, limit=100_000, parents_first=False)
        return sum(outbox.pending(owner) for owner in owners)
    except Exception:
        return None
