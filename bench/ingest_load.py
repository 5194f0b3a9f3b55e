"""The ingest benchmark's senders: as fast as they can, or paced at a fixed alert rate.

As fast as they can (closed loop): each of N senders posts its next notification as soon
as the last one is answered. That measures the most the server takes; its latency is
queueing by construction (N requests always in flight: p50 ≈ N / requests per second).

Paced (open loop): notification k is due at (alerts delivered before it) / rate, both
copies of the HA pair at the same moment from two senders (both count as delivered, as
in the as-fast-as-they-can figures). A sender that is still
waiting for an answer sends late, and its latency is counted from the due time, not
from when it got round to sending (no coordinated omission): a server that falls behind
the rate shows as a growing latency, never as a quietly lower rate.
"""

from __future__ import annotations

import gc
import http.client
import json
import threading
import time
from dataclasses import dataclass, field

from ingest_servers import TOKEN

from bot.rig.localredis import LocalRedis

Delivery = tuple[float, bytes]  # (due seconds after the start, or 0 for "now"; body)


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    acked: list[bytes] = field(default_factory=list)
    refused: int = 0  # 503 / no answer, retried
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def deliveries(bodies: list[bytes], rate: float | None) -> list[Delivery]:
    """Each notification twice (the HA pair), with its due time at ``rate`` alerts/s."""
    out: list[Delivery] = []
    sent = 0
    for body in bodies:
        due = sent / rate if rate else 0.0
        out += [(due, body), (due, body)]
        sent += 2 * len(json.loads(body)["alerts"])
    return out


def _post(conn: http.client.HTTPConnection, path: str, body: bytes) -> int:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        conn.close()
        return 0


def _record(stats: Stats, status: int, body: bytes, elapsed: float) -> None:
    with stats.lock:
        if 200 <= status < 300:
            stats.latencies.append(elapsed)
            stats.acked.append(body)
        elif status in (0, 503):
            stats.refused += 1
        else:
            stats.errors.append(f"HTTP {status}")


def sender(port: int, path: str, work: list[Delivery], stats: Stats, t0: float) -> None:
    """Post each delivery (at its due time when paced), retrying 503s as Alertmanager does."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for due, body in work:
        if due and (wait := t0 + due - time.perf_counter()) > 0:
            time.sleep(wait)
        start = t0 + due if due else time.perf_counter()
        give_up = time.monotonic() + 60  # Alertmanager would keep retrying; a bench must end
        while True:
            status = _post(conn, path, body)
            _record(stats, status, body, time.perf_counter() - start)
            if status not in (0, 503):
                break
            if time.monotonic() > give_up:
                with stats.lock:
                    stats.errors.append(f"gave up after 60 s (last: HTTP {status})")
                break
            time.sleep(0.2)  # Alertmanager backs off and retries
    conn.close()


def send_all(port: int, path: str, bodies: list[bytes], senders: int, *,
             rate: float | None = None, chaos: LocalRedis | None = None) -> tuple[Stats, float]:
    """All deliveries, shared round robin so the two copies go from different senders."""
    work = deliveries(bodies, rate)
    shares = [work[i::senders] for i in range(senders)]
    stats = Stats()
    gc.collect()
    gc.freeze()  # the senders' own collector pauses are not the server's latency
    t0 = time.perf_counter() + 0.05
    threads = [threading.Thread(target=sender, args=(port, path, s, stats, t0)) for s in shares]
    for t in threads:
        t.start()
    if chaos is not None:
        _kill_midway(chaos, stats, len(work))
    for t in threads:
        t.join()
    return stats, time.perf_counter() - t0


def _kill_midway(server: LocalRedis, stats: Stats, total: int) -> None:
    while len(stats.acked) < total // 2:
        time.sleep(0.01)
    server.kill()
    print(f"    redis-server SIGKILLed after {len(stats.acked)} acknowledged notifications")
    time.sleep(1.0)
    server.start()
    print("    redis-server restarted (AOF replayed)")
