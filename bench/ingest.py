"""Alert ingest benchmark: a storm sent as an HA pair of Alertmanagers would send it.

10,000 alerts from 500 hosts (8 GPU alerts, 4 filesystem alerts, a reboot and 7 other
alerts per host), in notifications of up to 50 alerts grouped by alertname, each
notification repeating some alerts already sent (Alertmanager resends a group's alerts)
and sent twice (the HA pair), then 20% of the alerts resolved (also twice).

Runs, side by side, against a real ``incident-bot serve`` process and a private
``redis-server`` (AOF, appendfsync always). First paced at ``--rate`` alerts/s from 4
senders (the goal: p99 under 50 ms while sustaining 2,000/s; latency counted from each
notification's due time, see ``ingest_load.py``):
  1. incident-bot            dedup, fold, group; concurrent requests share a write
  2. a write per request     the same with ``http.group_commit: false``
  3. naive baseline          one incident per alert delivery: numbering, hash and event in
                             one script call per alert, all of a notification pipelined
then with the senders as fast as they can (the most each server takes):
  4. incident-bot, 5. naive baseline,
  6. incident-bot + SIGKILL  redis-server killed and restarted mid-run; the senders retry
                             503s as Alertmanager does; acknowledged-and-lost must be 0
  7. one sender              the same workload, no concurrency
  8. the full service        flow, scheduler and Slack (a local stand-in): top-level chat
                             messages counted where Slack would receive them; RSS after it
and the agent's resident memory (``python -m bot.agent --once`` and the CLI path).

Usage: python bench/ingest.py [--hosts 500] [--per-host 20] [--batch 50] [--senders 4]
       [--rate 2000] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.rig.localredis import start_local_redis  # noqa: E402
from bot.rig.slack_standin import SlackStandIn  # noqa: E402
from storage import keys  # noqa: E402
from storage.connection import connect  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from ingest_load import Stats, send_all  # noqa: E402
from ingest_servers import (  # noqa: E402
    GROUP_WAIT_S,
    SLACK_TOKEN,
    _cpu_s,
    _redis_cpu_s,
    agent_rss,
    rss_mib,
    start_bot,
    start_naive,
    stop,
)

ALERTNAMES = (["GpuMemoryHeldIdle"] * 8 + ["NodeFilesystemAlmostOutOfSpace"] * 2
              + ["NodeFilesystemFilesFillingUp"] * 2 + ["GpuHostRebooted"]
              + [f"VendorCheck{n}" for n in range(7)])


# --- workload -------------------------------------------------------------------------
def make_alerts(hosts: int, per_host: int) -> list[dict[str, Any]]:
    out = []
    for h in range(hosts):
        host = f"gpu-{h:04d}"
        for n, name in enumerate(ALERTNAMES[:per_host]):
            labels = {"alertname": name, "instance": f"{host}:9100", "slot": str(n),
                      "severity": "critical"}
            out.append({"status": "firing", "labels": labels,
                        "annotations": {"summary": f"{name} on {host}"},
                        "startsAt": "2024-05-01T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
                        "fingerprint": hashlib.sha1(f"{host}{n}".encode()).hexdigest()[:16]})
    return out


def notifications(alerts: list[dict[str, Any]], batch: int, rng: random.Random) -> list[bytes]:
    """Firing notifications (with resent group members), then resolutions."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for a in alerts:
        by_name.setdefault(a["labels"]["alertname"], []).append(a)
    bodies: list[bytes] = []
    for group in by_name.values():
        sent: list[dict[str, Any]] = []
        for i in range(0, len(group), batch):
            new = group[i:i + batch]
            repeats = rng.sample(sent, min(len(sent), batch // 5))
            bodies.append(_payload(new + repeats))
            sent.extend(new)
    rng.shuffle(bodies)
    resolved = [{**a, "status": "resolved", "endsAt": "2024-05-01T11:00:00Z"}
                for a in rng.sample(alerts, len(alerts) // 5)]
    bodies += [_payload(resolved[i:i + batch]) for i in range(0, len(resolved), batch)]
    return bodies


def _payload(alerts: list[dict[str, Any]]) -> bytes:
    return json.dumps({"version": "4", "status": "firing", "receiver": "incident-bot",
                       "groupKey": "{}:{alertname}", "alerts": alerts}).encode()


def identity_keys(body: bytes) -> list[str]:
    """The dedup markers an acknowledged notification must leave (as the bot computes them)."""
    out = []
    for a in json.loads(body)["alerts"]:
        ident = f"am\0{a['fingerprint']}\0{a['status']}\0{a['startsAt']}"
        out.append(hashlib.sha1(ident.encode()).hexdigest())
    return out


# --- runs -----------------------------------------------------------------------------
def run(name: str, bodies: list[bytes], senders: int, *, rate: float | None = None,
        naive: bool = False, chaos: bool = False, group_commit: bool = True,
        full: bool = False) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="ib-bench-"))
    (workdir / "redis").mkdir()
    redis_server = start_local_redis(workdir / "redis")
    standin = SlackStandIn(token=SLACK_TOKEN).start() if full else None
    if naive:
        proc, port = start_naive(redis_server.url)
    else:
        proc, port = start_bot(redis_server.url, workdir, group_commit,
                               standin.api_url if standin else None)
    redis = connect(redis_server.url)
    cpu_ready = _cpu_s(proc.pid)  # start-up's CPU is not ingest's
    try:
        pace = f" paced at {rate:.0f} alerts/s" if rate else " as fast as they can"
        print(f"  {name}: sending with {senders} sender(s){pace} ...", flush=True)
        stats, wall = send_all(port, "/alerts/alertmanager", bodies, senders, rate=rate,
                               chaos=redis_server if chaos else None)
        execs = _exec_calls(redis)
        writer = {} if naive else _writer_busy(port, wall)
        bot_cpu, redis_cpu = _cpu_s(proc.pid) - cpu_ready, _redis_cpu_s(redis)
        chat = _chat_messages(standin, redis) if standin else None
        rss_now, rss_peak = rss_mib(proc.pid)
        out = _report(name, stats, wall, redis, rss_now, rss_peak, check_lost=not naive)
        out |= {"exec_per_request": execs / max(1, len(stats.latencies)) if not naive else None,
                "chat_top_level": chat, "senders": senders, "rate": rate, **writer,
                "server_cpu_ms_per_100": 1e5 * bot_cpu / max(1, out["deliveries"]),
                "redis_cpu_ms_per_100": 1e5 * redis_cpu / max(1, out["deliveries"])}
        return out
    finally:
        stop(proc)
        if standin is not None:
            standin.stop()
        redis_server.stop()


def _writer_busy(port: int, wall: float) -> dict[str, float]:
    """From the server's own histogram: store writes, their mean wall time, and the share
    of the run a write was in flight (the writer is one at a time per process)."""
    from prometheus_client.parser import text_string_to_metric_families

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    got = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
           if s.name.startswith("incident_bot_ingest_write_duration_seconds_")}
    count = got.get("incident_bot_ingest_write_duration_seconds_count", 0.0)
    total = got.get("incident_bot_ingest_write_duration_seconds_sum", 0.0)
    return {"writes": count, "write_mean_ms": 1000 * total / max(count, 1.0),
            "writer_busy": total / wall}


def _exec_calls(redis: Any) -> int:
    """EXEC calls the server saw (aborted ones included): more than one per request means
    WATCH conflicts were retried; fewer means requests shared a write."""
    return int(redis.info("commandstats").get("cmdstat_exec", {}).get("calls", 0))


def _chat_messages(standin: SlackStandIn, redis: Any, quiet_s: float = 3.0,
                   limit_s: float = 90.0) -> int:
    """Top-level chat messages the flow posted (no thread_ts), once the flow has drained
    the event stream and posted nothing new for ``quiet_s``."""
    end, last, still = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < end:
        posts = [c for c in standin.calls_of("chat.postMessage")
                 if not c.params.get("thread_ts")]
        if len(posts) != last:
            last, still = len(posts), time.monotonic()
        elif time.monotonic() - still > quiet_s:
            break
        time.sleep(0.5)
    return max(last, 0)


def _report(name: str, stats: Stats, wall: float, redis: Any, rss_now: float,
            rss_peak: float, check_lost: bool) -> dict[str, Any]:
    delivered = sum(len(json.loads(b)["alerts"]) for b in stats.acked)
    expected = {k for body in stats.acked for k in identity_keys(body)}
    lost: int | str = "n/a"  # the baseline keeps no per-alert record to check against
    if check_lost:  # every acknowledged delivery left its marker (written with its effect)
        names = [keys.alert_seen(k) for k in expected]
        present = sum(redis.exists(*names[i:i + 1000]) for i in range(0, len(names), 1000))
        lost = len(names) - present
    lat = sorted(stats.latencies)
    # the baseline never indexes incidents: its sequence number is its incident count
    incidents = redis.zcard(keys.incidents_all()) or int(redis.get(keys.incident_seq()) or 0)
    return {"name": name, "wall_s": wall, "deliveries": delivered, "unique": len(expected),
            "alerts_per_s": delivered / wall, "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))], "requests": len(lat),
            "refused": stats.refused, "errors": len(stats.errors), "incidents": incidents,
            "opened_events": len(_opened(redis)), "lost": lost, "rss_mib": rss_now,
            "rss_peak_mib": rss_peak, "per_kind": _per_kind(redis),
            "max_per_window": _max_per_window(redis)}


def _opened(redis: Any) -> list[dict[str, str]]:
    rows = redis.xrange(keys.incident_events(), count=10**7)
    return [f for _, f in rows if f.get("type") == "incident.opened"]


def _per_kind(redis: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in _opened(redis):
        out[f.get("kind", "?")] = out.get(f.get("kind", "?"), 0) + 1
    return dict(sorted(out.items()))


def _max_per_window(redis: Any) -> int:
    """The most chat messages of one kind inside any GROUP_WAIT_S span (the aim: 1)."""
    times: dict[str, list[float]] = {}
    for entry_id, f in redis.xrange(keys.incident_events(), count=10**7):
        if f.get("type") == "incident.opened":
            times.setdefault(f.get("kind", "?"), []).append(int(entry_id.split("-")[0]) / 1000)
    worst = 0
    for stamps in times.values():
        for i, t in enumerate(stamps):
            worst = max(worst, sum(1 for u in stamps[i:] if u - t < GROUP_WAIT_S))
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=500)
    p.add_argument("--per-host", type=int, default=20)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--senders", type=int, default=4)
    p.add_argument("--rate", type=float, default=2000.0, help="paced runs' alerts per second")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args()
    rng = random.Random(args.seed)
    alerts = make_alerts(args.hosts, args.per_host)
    bodies = notifications(alerts, args.batch, rng)
    print(f"{len(alerts)} alerts from {args.hosts} hosts, {len(bodies)} notifications, "
          f"each sent twice, {args.senders} senders, cpus={os.cpu_count()}")
    n, rate = args.senders, args.rate
    results = [run("incident-bot paced", bodies, n, rate=rate),
               run("write per request paced", bodies, n, rate=rate, group_commit=False),
               run("naive paced", bodies, n, rate=rate, naive=True),
               run("incident-bot", bodies, n),
               run("naive", bodies, n, naive=True),
               run("incident-bot+SIGKILL", bodies, n, chaos=True),
               run("incident-bot 1 sender", bodies, 1),
               run("full serve + Slack", bodies, n, full=True)]
    agent = agent_rss()
    _print(results, agent, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    if args.json:
        args.json.write_text(json.dumps({"alerts": len(alerts), "runs": results, "agent": agent},
                                        indent=2, default=str))


def _print(results: list[dict[str, Any]], agent: dict[str, float], client_rss: float) -> None:
    cols = ("deliveries", "alerts_per_s", "p50_ms", "p99_ms", "exec_per_request",
            "server_cpu_ms_per_100", "redis_cpu_ms_per_100", "refused", "errors", "incidents",
            "opened_events", "lost", "rss_mib")
    print("\n" + f"{'run':<24}" + "".join(f"{c[:13]:>14}" for c in cols))
    for r in results:
        print(f"{r['name']:<24}" + "".join(
            f"{r[c]:>14.1f}" if isinstance(r[c], float) else f"{r[c]!s:>14}" for c in cols))
    runs = {r["name"]: r for r in results}
    paced, per_request = runs["incident-bot paced"], runs["write per request paced"]
    ours, naive, full = runs["incident-bot"], runs["naive"], results[-1]
    print(f"\npaced at {paced['rate']:.0f} alerts/s, {paced['senders']} senders (latency from "
          f"each due time): incident-bot p50 {paced['p50_ms']:.1f} ms, p99 "
          f"{paced['p99_ms']:.1f} ms; a write per request p99 {per_request['p99_ms']:.1f} ms; "
          f"naive p99 {runs['naive paced']['p99_ms']:.1f} ms")
    print(f"the writer, paced: {paced['writes']:.0f} store writes for {paced['requests']} "
          f"requests, {paced['write_mean_ms']:.1f} ms each on average, one in flight "
          f"{100 * paced['writer_busy']:.0f}% of the run")
    print(f"\nopened_events = incident.opened stream entries: the flow posts one top-level chat "
          f"message for each (naive: one per delivery). Measured at the Slack stand-in with "
          f"the full service: {full['chat_top_level']} top-level chat messages for "
          f"{full['opened_events']} incident.opened events.")
    print(f"incident.opened per kind (incident-bot): {ours['per_kind']}; most of one kind "
          f"in any {GROUP_WAIT_S:.0f} s window: {ours['max_per_window']} "
          f"(naive: {naive['max_per_window']})")
    print(f"ratios vs naive: opened events "
          f"{naive['opened_events'] / max(1, ours['opened_events']):.0f}x fewer, incidents "
          f"{naive['incidents'] / max(1, ours['incidents']):.1f}x fewer, throughput "
          f"{ours['alerts_per_s'] / naive['alerts_per_s']:.2f}x")
    print(f"group commit vs a write per request, paced: p99 "
          f"{paced['p99_ms']:.1f} vs {per_request['p99_ms']:.1f} ms, EXEC per request "
          f"{paced['exec_per_request']:.2f} vs {per_request['exec_per_request']:.2f}, server CPU "
          f"{paced['server_cpu_ms_per_100']:.1f} vs {per_request['server_cpu_ms_per_100']:.1f} "
          f"ms per 100 alerts, redis-server CPU {paced['redis_cpu_ms_per_100']:.1f} vs "
          f"{per_request['redis_cpu_ms_per_100']:.1f}")
    print(f"bot peak RSS (alerts only) {ours['rss_peak_mib']:.1f} MiB; full serve after "
          f"{full['deliveries']} alert deliveries and {full['incidents']} incidents: "
          f"{full['rss_mib']:.1f} MiB now, {full['rss_peak_mib']:.1f} MiB peak; agent peak RSS: "
          + ", ".join(f"{k} {v:.1f} MiB" for k, v in agent.items()))
    print(f"(bench client RSS {client_rss:.1f} MiB)")


if __name__ == "__main__":
    main()
