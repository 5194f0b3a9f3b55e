"""A burst of alerts through two ``serve`` replicas, measured stage by stage (issue 37),
beside NVSentinel's published figures for a 200-event burst (NVIDIA/NVSentinel#1705).

The world, all real but Slack's servers:

- ``--hosts`` simulated GPU hosts (default 200), each its own OpenSSH sshd, in a mix of
  faults: ``seed`` (an inference unit auto-started at boot holds every GPU idle: alert
  ``vram_idle``), ``disk_full`` (``disk_full``), ``gpu_xid79`` (a GPU fell off the bus:
  ``gpu_xid``) and ``healthy`` (a false alarm, ``vram_idle``);
- two ``incident-bot serve`` processes on one redis-server (AOF always), alerts sent to
  both in turn over HTTP (``POST /alerts``, the agent's path), each alert its own request,
  all within ``--spread`` seconds (10);
- the Slack stand-in (``bot/rig/slack_standin.py``): Slack's pace is the bots' own shared
  budget (about a post a second per channel, ``chat.update`` 50 a minute per workspace);
  storms on (``slack.storm``, defaults);
- a real Slurm controller (slurmctld, munged) holding every ``gpu_xid79`` host's node; one
  of them has a running slurmd (one slurmd per machine), the others are defined and not
  responding: their drain is recorded by the real controller all the same (said so in the
  report);
- policies as an operator would write them: ``auto`` for the safe fixes (stopping and
  disabling an auto-started ``vllm-*`` unit; draining a Slurm node, which kills nothing),
  ``approve`` for the rest. The bench clicks Approve (a signed ``block_actions`` to serve,
  as Slack sends it) ``--approve-after`` seconds (30) after an incident awaits approval:
  a person's typical pause.

Stages per incident, p50 / p99 / max from its alert's send time:

- **visible**: the host's name first reached Slack, in its own message or a storm's;
- **diagnosed**: the incident left ``diagnosing`` with a diagnosis (its audit);
- **fix dispatched (auto)**: the auto fix started (``remediating``), seed hosts;
- **fixed and verified (auto)**: ``verified`` (GPUs free past the unit's restart window);
- **drained**: the controller shows the node DRAIN (``scontrol show node``), xid hosts.

Costs: the bots' CPU-seconds (both serve process trees, ``/proc``), the simulated hosts'
(their sshds and sessions), Redis commands (``INFO commandstats``, less the bench's own
polling, counted), Slack calls, all per incident. The machine has two cores shared by the
bots, the hosts' sshds, Redis, Slurm and the bench: when the hosts' CPU is the limit the
report says how much and what the bots alone would need.

Run: python bench/burst.py [--hosts 200] [--spread 10] [--approve-after 30] [--json out]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import tree_cpu  # noqa: E402

from bot.core.procs import free_port, stop_child  # noqa: E402
from bot.rig.localredis import start_local_redis  # noqa: E402
from bot.rig.signed import SignedSender  # noqa: E402
from bot.rig.slack_standin import SlackStandIn  # noqa: E402
from bot.sim.sshd import SimHost, start_sim  # noqa: E402
from storage import keys  # noqa: E402
from storage.audit import AuditLog  # noqa: E402
from storage.connection import connect  # noqa: E402
from tests.fixtures.slurm import SlurmCluster, slurm_conf  # noqa: E402

CHANNEL, USER = "C0BURST", "UBURST"
ALERT_TOKEN, BOT_TOKEN, SECRET = "burst-alert-token", "xoxb-burst", "burst-signing-secret"
# every 20 hosts: 2 with a GPU off the bus, 3 with a full disk, 2 false alarms, 13 seed
PATTERN = (["gpu_xid79"] * 2 + ["disk_full"] * 3 + ["healthy"] * 2 + ["seed"] * 13)
KIND = {"gpu_xid79": "gpu_xid", "disk_full": "disk_full", "healthy": "vram_idle",
        "seed": "vram_idle"}
# NVSentinel#1705, a 200-event burst: seconds from detection (p50, p99; None: not given)
NVSENTINEL = {"quarantined": (2.94, 5.10), "dispatched": (21.1, None), "back": (70.0, 89.0)}
GOALS = {"visible": ("p99", 3.0), "diagnosed": ("p99", 10.0), "verified": ("p50", 20.0)}
SETTLED = {"verified", "resolved", "no_action", "action_failed", "diagnosis_failed",
           "resumed", "denied", "expired"}


@dataclass
class Host:
    name: str
    scenario: str
    kind: str
    node: str | None = None  # its Slurm node (xid hosts)
    sim: SimHost | None = None
    sent: float = 0.0  # monotonic: when its alert left
    incident: str = ""
    seen: dict[str, float] = field(default_factory=dict)  # stage → monotonic


def plan(n: int) -> list[Host]:
    """``n`` hosts named ``burst-NNN``, the mix spread evenly through them."""
    hosts = []
    for i in range(n):
        scenario = PATTERN[(i * 7) % len(PATTERN)]  # 7 is prime to 20: every 20 gets each
        hosts.append(Host(f"burst-{i:03d}", scenario, KIND[scenario],
                          f"xid{i:03d}" if scenario == "gpu_xid79" else None))
    return hosts


# --- the world -------------------------------------------------------------------------
@contextmanager
def slurm(root: Path, nodes: list[str]) -> Iterator[SlurmCluster | None]:
    """A real controller holding ``nodes`` (the first with a running slurmd)."""
    if not nodes:
        yield None
        return
    cluster = SlurmCluster(root=root, node=nodes[0])
    for sub in ("munge", "state", "spool"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    conf = slurm_conf(root, nodes[0], free_port(), free_port())
    extra = "".join(f"NodeName={n} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n" for n in nodes[1:])
    cluster.conf.write_text(conf.replace("PartitionName=", extra + "PartitionName=", 1))
    sock = cluster.socket_dir / "munge.socket"
    try:
        _spawn(cluster, ["munged", "-F", "-f", f"--socket={sock}", f"--key-file={key}",
                         f"--log-file={root / 'munged.log'}",
                         f"--pid-file={root / 'munged.pid'}",
                         f"--seed-file={root / 'munged.seed'}"], "munged.out")
        cluster.wait(lambda: sock.exists(), "munged listening", timeout_s=15)
        _spawn(cluster, ["slurmctld", "-D", "-i"], "slurmctld.out")
        _spawn(cluster, ["slurmd", "-D", "-N", nodes[0]], "slurmd.out")
        cluster.wait(lambda: cluster.state() == "IDLE", "IDLE after start", timeout_s=30)
        yield cluster
    finally:
        cluster.stop()


def _spawn(cluster: SlurmCluster, argv: list[str], log: str) -> None:
    with open(cluster.root / log, "ab") as out:
        cluster.procs.append(subprocess.Popen(argv, env=cluster.env, stdin=subprocess.DEVNULL,
                                              stdout=out, stderr=out))


def start_hosts(hosts: list[Host], work: Path, cluster: SlurmCluster | None) -> None:
    def one(h: Host) -> None:
        kw: dict[str, Any] = {"workdir": work / h.name}
        if h.node and cluster is not None:
            kw |= {"binds": (cluster.socket_dir,), "env": {"SLURM_CONF": str(cluster.conf)}}
        h.sim = start_sim(h.scenario, **kw)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, hosts))


def config(hosts: list[Host], standin: SlackStandIn, port: int) -> dict[str, Any]:
    def entry(h: Host) -> dict[str, Any]:
        assert h.sim is not None
        out: dict[str, Any] = {"ssh": h.sim.target, "key": str(h.sim.key_path),
                               "known_hosts": str(h.sim.known_hosts_path), "gpus": 8}
        if h.node:
            out["slurm_node"] = h.node
        return out

    return {
        "http": {"host": "127.0.0.1", "port": port},
        "hosts": {h.name: entry(h) for h in hosts},
        "slack": {"channel": CHANNEL, "approvers": [USER], "api_url": standin.api_url},
        "policies": [
            {"name": "stop-autostarted-inference", "mode": "auto",
             "match": {"action": "systemd.stop_disable", "unit": "vllm-*"},
             "limit": {"max_hosts": 10_000, "per": "1h"}},
            {"name": "drain-broken-gpu-nodes", "mode": "auto",
             "match": {"action": "slurm.drain"}, "limit": {"max_hosts": 10_000, "per": "1h"}},
        ],
        "policy_limits": {"max_hosts_per_hour": 10_000, "max_fraction": 1.0},
        "extra": {"scheduler": {"enabled": False}},
    }


@contextmanager
def serves(cfg: dict[str, Any], work: Path, redis_url: str,
           replicas: int) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    """``replicas`` serve processes on one config (each its own port) and Redis."""
    procs: list[tuple[subprocess.Popen[bytes], str]] = []
    env = {**os.environ, "REDIS_URL": redis_url, "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN,
           "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET,
           "PYTHONPATH": str(ROOT), "INCIDENT_BOT_LOG_LEVEL": "WARNING"}
    try:
        for n in range(replicas):
            port = free_port()
            path = work / f"serve-{n}.yaml"
            path.write_text(json.dumps({**cfg, "http": {"host": "127.0.0.1", "port": port}}))
            with (work / f"serve-{n}.log").open("wb") as log:
                proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--config",
                                         str(path)], env=env, cwd=ROOT, stdout=log, stderr=log,
                                        stdin=subprocess.DEVNULL)
            procs.append((proc, f"http://127.0.0.1:{port}"))
        for proc, url in procs:
            _wait_ready(proc, url, work)
        yield procs
    finally:
        for proc, _ in procs:
            stop_child(proc, grace_s=15)


def _wait_ready(proc: subprocess.Popen[bytes], url: str, work: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited {proc.returncode}; see {work}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"serve did not become ready; see {work}")


# --- the run ---------------------------------------------------------------------------
class Watch:
    """What the bench sees while the burst runs: Slack (in this process), the Slurm
    controller, incident states (Redis, every command counted), and the clicks it makes."""

    def __init__(self, hosts: list[Host], standin: SlackStandIn, redis_url: str,
                 cluster: SlurmCluster | None, sender: SignedSender, approve_after_s: float):
        self.hosts, self.standin, self.cluster, self.sender = hosts, standin, cluster, sender
        self.redis = connect(redis_url)
        self.approve_after_s = approve_after_s
        self.commands = 0  # Redis commands this bench sent during the run
        self._calls = 0
        self._names = re.compile(r"(?<![\w-])(burst-\d{3})(?![\w-])")
        self._by_name = {h.name: h for h in hosts}
        self._awaiting: dict[str, float] = {}
        self.clicked: dict[str, float] = {}
        self._last = 0.0

    def poll(self) -> None:
        """Slack every call (its own clock says when); the rest twice a second: the
        bench must not take the CPU it measures."""
        now = time.monotonic()
        self._slack(now)
        if now - self._last < 0.5:
            return
        self._last = now
        self._states(now)
        self._slurm(now)
        self._click(now)

    def _slack(self, now: float) -> None:
        calls = self.standin.calls
        new, self._calls = calls[self._calls:len(calls)], len(calls)
        for call in new:
            if call.method not in ("chat.postMessage", "chat.update"):
                continue
            for name in set(self._names.findall(json.dumps(call.params))):
                h = self._by_name.get(name)
                if h is not None and "visible" not in h.seen and call.at >= h.sent:
                    h.seen["visible"] = call.at

    def _states(self, now: float) -> None:
        open_ = [h for h in self.hosts if h.incident]
        with self.redis.pipeline(transaction=False) as pipe:
            for h in open_:
                pipe.hget(keys.incident(h.incident), "state")
            states = pipe.execute()
        self.commands += len(open_)
        for h, state in zip(open_, states, strict=True):
            if state:
                h.seen.setdefault(f"state:{state}", now)

    def _slurm(self, now: float) -> None:
        if self.cluster is None:
            return
        out = self.cluster.run("scontrol", "show", "node", "-o", check=False).stdout
        for line in out.splitlines():
            m = re.search(r"NodeName=(\S+).*?State=(\S+)", line)
            if m and "DRAIN" in m.group(2):
                for h in self.hosts:
                    if h.node == m.group(1):
                        h.seen.setdefault("drained", now)

    def _click(self, now: float) -> None:
        """A person's click ``approve_after_s`` after an incident awaits approval."""
        for h in self.hosts:
            if "state:awaiting_approval" not in h.seen or h.incident in self.clicked:
                continue
            if now - h.seen["state:awaiting_approval"] < self.approve_after_s:
                continue
            self.commands += 1
            raw, chat = self.redis.hmget(keys.incident(h.incident), ["plans", "chat"])
            plans = json.loads(raw) if raw else []
            card = json.loads(chat) if chat else None
            if plans and not card:  # the click comes from the card that holds the button
                continue  # not delivered yet: next poll
            if plans and card:
                try:
                    r = self.sender.block_action(USER, "approve", str(plans[0]["approval_id"]),
                                                 channel=str(card["channel"]),
                                                 message_ts=str(card["ts"]))
                except httpx.HTTPError as exc:  # a busy serve closed the connection: again
                    print(f"click on {h.incident} not delivered ({exc}); again next poll",
                          flush=True)
                    continue
                if r.status_code != 200:
                    print(f"click on {h.incident} answered {r.status_code}; again next poll",
                          flush=True)
                    continue
            self.clicked[h.incident] = now

    def settled(self) -> bool:
        for h in self.hosts:
            if "visible" not in h.seen or not h.incident:
                return False
            if not _done(h, self.cluster is not None):
                return False
        return True


def stop_hosts(hosts: list[Host]) -> None:
    for h in hosts:
        if h.sim is not None:
            h.sim.stop()


def send_alerts(hosts: list[Host], urls: list[str], spread_s: float) -> None:
    """One request per alert, to the replicas in turn, evenly over ``spread_s``."""
    start = time.monotonic()

    def one(n: int) -> None:
        h = hosts[n]
        due = start + spread_s * n / max(1, len(hosts))
        time.sleep(max(0.0, due - time.monotonic()))
        h.sent = time.monotonic()
        body = {"host": h.name, "kind": h.kind, "severity": "critical", "id": f"burst-{n}",
                "summary": f"{h.kind} on {h.name}"}
        for attempt in range(10):  # as the agent does: 503 and a dropped connection retried
            try:
                r = httpx.post(f"{urls[(n + attempt) % len(urls)]}/alerts", json=body,
                               timeout=60, headers={"Authorization": f"Bearer {ALERT_TOKEN}"})
            except httpx.HTTPError:
                time.sleep(0.5)
                continue
            if r.status_code == 200:
                h.incident = str(r.json()["incidents"][0])
                h.seen["stored"] = time.monotonic()  # on disk (AOF always), answered 200
                return
            time.sleep(0.5)
        raise SystemExit(f"the alert of {h.name} was not taken after 10 tries")

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(one, range(len(hosts))))


IDLE_S = 5.0


def idle_rates(bot_pids: list[int], url: str, seconds: float) -> dict[str, float]:
    """The replicas' CPU and Redis commands per second with nothing to do (their loops:
    the outbox, the events consumer, the reconciler, the storms), measured before the
    burst so a run's per-incident figures can be told apart from time passing."""
    time.sleep(1.0)
    cpu0, cmds0 = sum(tree_cpu(p) for p in bot_pids), sum(commandstats(url).values())
    time.sleep(seconds)
    cpu1, cmds1 = sum(tree_cpu(p) for p in bot_pids), sum(commandstats(url).values())
    return {"bot_cpu_per_s": (cpu1 - cpu0) / seconds,
            "redis_per_s": (cmds1 - cmds0 - 2) / seconds}


def used_memory(url: str) -> int:
    return int(connect(url).info("memory")["used_memory"])  # type: ignore[index]


def rss_mib(pid: int) -> float:
    """A process's resident memory (its own, not its children's)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def commandstats(url: str) -> dict[str, int]:
    """Calls per command so far (``INFO commandstats``)."""
    info: dict[str, Any] = connect(url).info("commandstats")  # type: ignore[assignment]
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in info.items()
            if isinstance(v, dict)}


# --- the figures -----------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def stage_times(hosts: list[Host], audit: AuditLog, offset: float,
                placed: dict[str, float]) -> dict[str, list[float]]:
    """Seconds from each alert to each stage (wall-clock audit times brought onto this
    process's monotonic clock by ``offset``). ``placed``: when each storm member joined
    its storm (wall clock); visible minus placed is the chat's own part."""
    out: dict[str, list[float]] = {"stored": [], "placed": [], "visible": [],
                                   "diagnosed": [], "dispatched": [], "verified": [],
                                   "drained": []}
    for h in hosts:
        if "visible" in h.seen:
            out["visible"].append(h.seen["visible"] - h.sent)
        if "stored" in h.seen:
            out["stored"].append(h.seen["stored"] - h.sent)
        if "drained" in h.seen:
            out["drained"].append(h.seen["drained"] - h.sent)
        if h.incident in placed:
            out["placed"].append(placed[h.incident] - offset - h.sent)
        for entry in audit.timeline(h.incident) if h.incident else ():
            if entry.action != "transition":
                continue
            at = entry.ts - offset - h.sent
            frm, to = entry.detail.get("from"), entry.detail.get("to")
            if frm == "diagnosing" and "diagnosed" not in h.seen:
                h.seen["diagnosed"] = at
                out["diagnosed"].append(at)
            if h.scenario == "seed" and to == "remediating" and "dispatched" not in h.seen:
                h.seen["dispatched"] = at
                out["dispatched"].append(at)
            if h.scenario == "seed" and to == "verified" and "verified_at" not in h.seen:
                h.seen["verified_at"] = at
                out["verified"].append(at)
    return out


def storm_joins(url: str) -> dict[str, float]:
    """Incident id → when it joined a storm (after the run: not counted)."""
    redis = connect(url)
    out: dict[str, float] = {}
    for n in range(1, int(str(redis.get(keys.storm_seq()) or 0)) + 1):
        for member, at in redis.zrange(keys.storm_members(f"storm-{n}"), 0, -1,
                                       withscores=True):
            out[str(member)] = float(at)
    return out


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": pct(values, 0.5), "p99": pct(values, 0.99),
            "max": max(values) if values else float("nan")}


def run(args: argparse.Namespace) -> dict[str, Any]:
    hosts = plan(args.hosts)
    work = Path(tempfile.mkdtemp(prefix="ib-burst-"))
    with ExitStack() as stack:
        redis = start_local_redis(work / "redis")
        stack.callback(redis.stop)
        standin = stack.enter_context(SlackStandIn(token=BOT_TOKEN))
        nodes = [h.node for h in hosts if h.node]
        cluster = stack.enter_context(slurm(work / "slurm", nodes))
        started = time.monotonic()
        start_hosts(hosts, work / "hosts", cluster)
        stack.callback(stop_hosts, hosts)
        print(f"{len(hosts)} hosts up in {time.monotonic() - started:.1f} s ({mix(hosts)}); "
              f"Slurm nodes {len(nodes)} ({'1 with slurmd' if nodes else 'none'})", flush=True)
        replicas = stack.enter_context(serves(config(hosts, standin, 0), work, redis.url,
                                              args.replicas))
        sender = SignedSender(f"{replicas[0][1]}/slack/events", SECRET, standin.base)
        stack.callback(sender.close)
        watch = Watch(hosts, standin, redis.url, cluster, sender, args.approve_after)
        bot_pids = [p.pid for p, _ in replicas]
        sim_pids = [h.sim.pid for h in hosts if h.sim is not None]
        idle = idle_rates(bot_pids, redis.url, IDLE_S)  # what the replicas cost doing nothing
        bot0, sims0 = sum(tree_cpu(p) for p in bot_pids), sum(tree_cpu(p) for p in sim_pids)
        redis0 = commandstats(redis.url)
        mem0 = used_memory(redis.url)
        offset = time.time() - time.monotonic()
        begin = time.monotonic()
        sender_thread = threading.Thread(target=send_alerts, args=(
            hosts, [u for _, u in replicas], args.spread), daemon=True)
        sender_thread.start()
        deadline = begin + args.timeout
        while time.monotonic() < deadline:
            watch.poll()
            if not sender_thread.is_alive() and watch.settled():
                break
            time.sleep(0.1)
        took = time.monotonic() - begin
        sender_thread.join(timeout=60)
        redis1 = commandstats(redis.url)
        mem1 = used_memory(redis.url)
        rss = [rss_mib(p) for p in bot_pids]
        bot_cpu = sum(tree_cpu(p) for p in bot_pids) - bot0
        sim_cpu = sum(tree_cpu(p) for p in sim_pids) - sims0
        stages = stage_times(hosts, AuditLog(connect(redis.url)), offset,
                             storm_joins(redis.url))
        top = len(standin.top_level(CHANNEL))
        posts, updates = (len(standin.calls_of(m)) for m in ("chat.postMessage", "chat.update"))
        storms = int(str(connect(redis.url).get(keys.storm_seq()) or 0))  # after the run
    n = len(hosts)
    bench_cmds = watch.commands + 1  # + the INFO itself
    return {
        "hosts": n, "replicas": args.replicas, "spread_s": args.spread,
        "approve_after_s": args.approve_after, "settled": watch.settled(), "took_s": took,
        "mix": {sc: sum(h.scenario == sc for h in hosts) for sc in sorted(KIND)},
        "stages": {k: summary(v) for k, v in stages.items()},
        "bot_cpu_s": bot_cpu, "bot_cpu_per_incident_s": bot_cpu / n,
        "sim_cpu_s": sim_cpu, "sim_cpu_per_incident_s": sim_cpu / n,
        "cores": os.cpu_count() or 1,
        "redis_commands_per_incident": (sum(redis1.values()) - sum(redis0.values())
                                        - bench_cmds) / n,
        "redis_top": sorted(((k, (v - redis0.get(k, 0)) / n) for k, v in redis1.items()),
                            key=lambda kv: -kv[1])[:8],
        "redis_per_s": (sum(redis1.values()) - sum(redis0.values()) - bench_cmds) / took,
        "idle": idle,
        "redis_bytes_per_incident": (mem1 - mem0) / n, "serve_rss_mib": rss,
        # what incidents added over what the replicas cost idle for as long
        "redis_marginal_per_incident": (sum(redis1.values()) - sum(redis0.values())
                                        - bench_cmds - idle["redis_per_s"] * took) / n,
        "bot_cpu_marginal_per_incident_s": (bot_cpu - idle["bot_cpu_per_s"] * took) / n,
        "slack": {"top_level": top, "posts": posts, "updates": updates, "storms": storms,
                  "posts_per_incident": posts / n, "updates_per_incident": updates / n},
        "slurm": {"nodes": len(nodes), "with_slurmd": 1 if nodes else 0},
        "load": os.getloadavg(),
        "not_settled": [f"{h.name} ({h.scenario}: {_last_state(h)})" for h in hosts
                        if not _done(h, cluster is not None)][:20],
        "nvsentinel": NVSENTINEL,
    }


def _last_state(h: Host) -> str:
    seen = sorted((at, k) for k, at in h.seen.items() if k.startswith("state:"))
    return seen[-1][1].removeprefix("state:") if seen else "no incident state seen"


def mix(hosts: list[Host]) -> str:
    return ", ".join(f"{sc} {sum(h.scenario == sc for h in hosts)}" for sc in sorted(KIND))


def _done(h: Host, slurm_on: bool) -> bool:
    """Drained where the fault calls for it (or its diagnosis ended without a drain to
    offer: failed, nothing found), else settled in its final state."""
    states = {k.removeprefix("state:") for k in h.seen if k.startswith("state:")}
    if h.scenario == "gpu_xid79" and slurm_on:
        return "drained" in h.seen or bool(states & (SETTLED - {"verified", "resumed"}))
    return bool(states & SETTLED)


def report(r: dict[str, Any]) -> None:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["mix"].items()))
    print(f"\nburst: {r['hosts']} hosts ({kinds}) "
          f"alerting within {r['spread_s']:.0f} s, {r['replicas']} serve replicas; "
          f"{'settled' if r['settled'] else 'NOT settled'} after {r['took_s']:.0f} s")
    print(f"{'stage':<28}{'n':>5}{'p50':>9}{'p99':>9}{'max':>9}   NVSentinel (p50 / p99), "
          "ratio theirs/ours")
    theirs = {"drained": "quarantined", "dispatched": "dispatched", "verified": "back"}
    for stage, s in r["stages"].items():
        nv = r["nvsentinel"].get(theirs.get(stage, ""))
        side = ""
        if nv:
            p50, p99 = nv
            side = (f"{p50:.2f} s / {p99:.2f} s" if p99 else f"{p50:.1f} s / -") + (
                f"; {p50 / s['p50']:.2f}x" if s["n"] and s["p50"] > 0 else "")
        print(f"{stage:<28}{s['n']:>5}{s['p50']:>9.2f}{s['p99']:>9.2f}{s['max']:>9.2f}   {side}")
    print(f"bot CPU {r['bot_cpu_per_incident_s']:.3f} s/incident ({r['bot_cpu_s']:.1f} s, "
          f"both replicas); simulated hosts {r['sim_cpu_per_incident_s']:.3f} s/incident "
          f"({r['sim_cpu_s']:.1f} s); Redis {r['redis_commands_per_incident']:.0f} "
          f"commands/incident; Slack {r['slack']['posts_per_incident']:.2f} posts and "
          f"{r['slack']['updates_per_incident']:.2f} edits/incident, "
          f"{r['slack']['top_level']} top-level messages, {r['slack']['storms']} storms")
    print(f"Redis memory {r['redis_bytes_per_incident'] / 1024:.0f} KiB/incident; serve RSS "
          + ", ".join(f"{m:.0f} MiB" for m in r["serve_rss_mib"]))
    print(f"idle, both replicas: {r['idle']['bot_cpu_per_s'] * 1000:.0f} ms CPU/s, "
          f"{r['idle']['redis_per_s']:.0f} Redis commands/s; per incident over idle: bots "
          f"{r['bot_cpu_marginal_per_incident_s']:.3f} CPU-s, Redis "
          f"{r['redis_marginal_per_incident']:.0f} commands")
    print("Redis per incident, most called: " + ", ".join(
        f"{k} {v:.0f}" for k, v in r["redis_top"]) + f" ({r['redis_per_s']:.0f}/s in all)")
    if r["not_settled"]:
        print(f"not settled: {', '.join(r['not_settled'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--spread", type=float, default=10.0)
    ap.add_argument("--approve-after", type=float, default=30.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    r = run(args)
    report(r)
    if args.json is not None:
        args.json.write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
