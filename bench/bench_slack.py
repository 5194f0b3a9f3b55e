"""Slack side benchmarks, measured side by side in one run (real redis-server, real HTTP).

1. ack latency of /slack/events for signed block_actions (Slack wants < 3 s);
2. approval claims under contention, 20 threads racing on each approval, all exactly-once:
   a one-script Lua claim vs a WATCH/MULTI optimistic claim with the same checks (the
   fair pair), and the store's own ``ApprovalStore.claim`` shown apart: also one round
   trip, it checks more (the user's rights against the approval's kind and requester,
   the two-person rule) and returns the whole record;
3. chat.update coalescing: edits submitted vs Web API calls sent.

Run: python bench/bench_slack.py [--approvals 100]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from redis import Redis
from redis.exceptions import WatchError

from bot.chat.base import ChatMessage
from bot.chat.slack import SlackBackend, make_client
from bot.domain.approval import ApprovalAction, ApprovalPolicy, ClaimOutcome
from bot.rig.localredis import start_local_redis
from bot.rig.slack_standin import SlackStandIn
from storage import keys
from storage.approvals import ApprovalStore
from storage.connection import connect
from tests.fixtures.slack import SlackRig, slack_test_settings

RESULTS: dict[str, Any] = {}
POLICY = ApprovalPolicy(approvers=frozenset(f"U{i:03d}" for i in range(20)), expiry_s=600)
ACTION = ApprovalAction("systemd.stop_disable", {"unit": "x"})


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def bench_ack(redis: Redis, n: int) -> None:
    with SlackStandIn(token="xoxb-0000-test") as standin:
        rig = SlackRig(standin, slack_test_settings(standin), redis).start()
        store = ApprovalStore(redis)
        ids = [
            store.create(
                "1", ACTION, evidence_hash="e", requested_by="x", now=time.time(), policy=POLICY
            ).id
            for _ in range(n)
        ]
        assert rig.sender is not None
        lat = []
        for approval_id in ids:
            t = time.perf_counter()
            assert rig.sender.block_action("UALICE", "approve", approval_id).status_code == 200
            lat.append((time.perf_counter() - t) * 1000)
        rig.drain()
        rig.stop()
    RESULTS["ack"] = {"p50_ms": statistics.median(lat), "p99_ms": pct(lat, 0.99), "n": n}
    print(
        f"ack latency, {n} signed block_actions over HTTP: p50 {statistics.median(lat):.1f} ms, "
        f"p99 {pct(lat, 0.99):.1f} ms, max {max(lat):.1f} ms (Slack's limit 3000 ms; "
        f"p99 is {3000 / pct(lat, 0.99):.0f}x under it); approved {len(rig.approved)}/{n}"
    )


def watch_claim(client: Redis, approval_id: str, user: str, now: float) -> ClaimOutcome:
    """The alternative: optimistic WATCH/MULTI, retried on conflict (3+ round trips)."""
    key = keys.approval(approval_id)
    while True:
        with client.pipeline() as pipe:
            try:
                pipe.watch(key)
                status, expires = cast(list[Any], pipe.hmget(key, ["status", "expires_at"]))
                if status != "pending":
                    return ClaimOutcome.ALREADY_DONE
                if now >= float(expires or 0):
                    return ClaimOutcome.EXPIRED
                pipe.multi()
                pipe.hset(
                    key, mapping={"status": "approved", "decided_by": user, "approvers": user}
                )
                pipe.zrem(keys.approvals_pending(), approval_id)
                pipe.execute()
                return ClaimOutcome.CLAIMED
            except WatchError:
                continue


# The same checks and writes as ``watch_claim``, in one EVALSHA: one round trip per click.
LUA_CLAIM = """
local v = redis.call('HMGET', KEYS[1], 'status', 'expires_at')
if v[1] ~= 'pending' then return 'already_done' end
if tonumber(ARGV[3]) >= tonumber(v[2] or '0') then return 'expired' end
redis.call('HSET', KEYS[1], 'status', 'approved', 'decided_by', ARGV[2], 'approvers', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
return 'claimed'
"""


def lua_claim(client: Redis, approval_id: str, user: str, now: float) -> ClaimOutcome:
    """The fair Lua side: one script call, nothing read before it."""
    script = client.register_script(LUA_CLAIM)  # local object; EVALSHA, loads on NOSCRIPT
    raw = script(keys=[keys.approval(approval_id), keys.approvals_pending()],
                 args=[approval_id, user, repr(now)])
    return ClaimOutcome(raw.decode() if isinstance(raw, bytes) else raw)


def race(
    url: str, ids: list[str], claim: Callable[[Redis, str, str], ClaimOutcome]
) -> tuple[float, int]:
    wins: list[ClaimOutcome] = []
    lock = threading.Lock()
    barrier = threading.Barrier(20)

    def worker(i: int) -> None:
        client = connect(url)
        barrier.wait()
        mine = [claim(client, a, f"U{i:03d}") for a in ids]
        with lock:
            wins.extend(mine)
        client.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t, wins.count(ClaimOutcome.CLAIMED)


def bench_claims(url: str, redis: Redis, n: int) -> None:
    store = ApprovalStore(redis)
    now = time.time()

    def fresh() -> list[str]:
        return [
            store.create(
                "1", ACTION, evidence_hash="e", requested_by="x", now=now, policy=POLICY
            ).id
            for _ in range(n)
        ]

    lua_t, lua_wins = race(url, fresh(), lambda c, a, u: lua_claim(c, a, u, now))
    watch_t, watch_wins = race(url, fresh(), lambda c, a, u: watch_claim(c, a, u, now))
    store_t, store_wins = race(
        url, fresh(), lambda c, a, u: ApprovalStore(c).claim(a, u, now, POLICY).outcome
    )
    clicks = 20 * n
    print(
        f"claims, 20 threads x {n} approvals ({clicks} clicks): one-round-trip Lua {lua_t:.2f} s "
        f"({clicks / lua_t:.0f} clicks/s, winners {lua_wins}/{n}) vs WATCH/MULTI {watch_t:.2f} s "
        f"({clicks / watch_t:.0f} clicks/s, winners {watch_wins}/{n}); "
        f"WATCH time / Lua time {watch_t / lua_t:.2f}x"
    )
    print(
        f"  ApprovalStore.claim (one round trip, rights checked in the script, record back) "
        f"{store_t:.2f} s ({clicks / store_t:.0f} clicks/s, winners {store_wins}/{n}); "
        f"WATCH time / store time {watch_t / store_t:.2f}x"
    )
    RESULTS["claims"] = {"lua_s": lua_t, "watch_s": watch_t, "store_s": store_t,
                         "winners": [lua_wins, watch_wins, store_wins], "approvals": n}


def bench_coalescing(seconds: float) -> None:
    with SlackStandIn(token="xoxb-0000-test") as standin:
        chat = SlackBackend(make_client(slack_test_settings(standin)), update_interval_s=2.0)
        ref = chat.post("C1", ChatMessage(text="start"))
        submitted, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            chat.update(ref, ChatMessage(text=f"progress {submitted}"))
            submitted += 1
            time.sleep(0.05)
        chat.flush(10)
        sent = standin.calls_of("chat.update")
        gaps = [b.at - a.at for a, b in itertools.pairwise(sent)]
        last_ok = standin.messages[("C1", ref.ts)]["text"] == f"progress {submitted - 1}"
        chat.close()
    print(
        f"coalescing, {seconds:.0f} s of edits at 20/s: {submitted} submitted, "
        f"{len(sent)} chat.update sent ({submitted / len(sent):.0f}x fewer), "
        f"min gap {min(gaps):.2f} s, last content kept: {last_ok}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--approvals", type=int, default=100)
    parser.add_argument("--acks", type=int, default=200)
    parser.add_argument("--coalesce-s", type=float, default=8.0)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    server = start_local_redis()
    try:
        redis = connect(server.url)
        redis.flushdb()
        bench_ack(redis, args.acks)
        bench_claims(server.url, redis, args.approvals)
        bench_coalescing(args.coalesce_s)
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps(RESULTS, indent=2))


if __name__ == "__main__":
    main()
