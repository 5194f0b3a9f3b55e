"""The first message of twelve alerts at once, one host's ``nvidia-smi`` hung (issue 29).

The whole ``serve`` assembly (flow consumer with its diagnosis pool, chat outbox with the
shared Slack budget: one post a second per channel) against a real redis-server, the
Slack stand-in over HTTP and simulated hosts behind a real sshd: eleven hosts on the seed
scenario, one (``gpu-07``) whose ``nvidia-smi`` hangs until the probe deadline (10 s, the
default). Twelve alerts are stored at once; from that moment the run records when each
incident's parent message reached the stand-in, and when its full card (the diagnosis)
did. Three settings, side by side in one run, each on a clean database:

- before: no message until the diagnosis ends, outbox in plain due order (``DiagnoseStep(
  alert_card=False)``, ``ChatOutbox(parents_first=False)``);
- alert card: the message queued when the event is read (``Publisher.announce``, before
  it waits for a diagnosis worker) and when the diagnosis starts, then edited;
- alert card + parents first: as shipped, first posts before thread replies.

Slack's pace puts the twelfth parent at about 11 s at best; the ratio printed is the
before setting's last parent over ours (higher is better for us). Nothing is asserted.

Run: python bench/first_message.py [--hosts 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config.settings import Settings
from bot.core import strings
from bot.domain.findings import Severity
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.rig.localredis import start_local_redis
from bot.rig.slack_standin import Call, SlackStandIn
from bot.service import build_service
from bot.sim.sshd import SimHost, start_sim
from storage.connection import connect

CHANNEL, TOKEN, HUNG = "C0BENCH", "xoxb-bench", "gpu-07"
MARK = strings.MSG_ALERT_DIAGNOSING.split("…")[0]
SETTINGS = {"before": (False, False), "alert card": (True, False),
            "alert card + parents first": (True, True)}
SETTLED_WAIT_S = 180.0


def settings(redis_url: str, hosts: dict[str, SimHost], api_url: str) -> Settings:
    def host(sim: SimHost) -> dict[str, str]:
        return {"ssh": sim.target, "key": str(sim.key_path),
                "known_hosts": str(sim.known_hosts_path)}

    return Settings.model_validate({
        "redis_url": redis_url, "hosts": {n: host(s) for n, s in hosts.items()},
        # each incident's own parent is what is measured: storms off (bench/burst.py has them)
        "slack": {"channel": CHANNEL, "approvers": ["UONCALL"], "api_url": api_url,
                  "storm": {"per_minute": 0}},
        "alerts": {"group_wait_s": 0}, "extra": {"scheduler": {"enabled": False}},
        "slack_signing_secret": "bench-secret", "slack_bot_token": TOKEN})


def one_run(redis_url: str, hosts: dict[str, SimHost], alert_card: bool,
            parents_first: bool) -> dict[str, Any]:
    """Twelve alerts at once through a fresh service; seconds from the alerts to each
    incident's parent and to its full card."""
    connect(redis_url).flushdb()
    with SlackStandIn(token=TOKEN) as standin:
        service = build_service(settings(redis_url, hosts, standin.api_url))
        service.flow.diagnosis().alert_card = alert_card
        service.flow.publisher.early_cards = alert_card
        service.flow.outbox.parents_first = parents_first
        service.start_background()
        try:
            store = service.flow.incidents
            start = time.monotonic()
            ids = {name: store.open_or_fold(Alert(
                source="bench", host=name, kind="vram_idle", severity=Severity.CRITICAL,
                summary="GPU memory held at 0% utilisation"))[0].id for name in hosts}
            deadline = start + SETTLED_WAIT_S
            while not _all_shown(standin, store, ids):
                if time.monotonic() > deadline:
                    raise SystemExit("the incidents did not settle in time")
                time.sleep(0.1)
            calls = standin.calls_of("chat.postMessage") + standin.calls_of("chat.update")
        finally:
            service.close()
    parents = {name: _parent_at(calls, iid) - start for name, iid in ids.items()}
    cards = {name: _card_at(calls, iid, store.require(iid).chat.ts) - start  # type: ignore[union-attr]
             for name, iid in ids.items()}
    ordered = sorted(parents.values())
    return {"first_parent_s": ordered[0], "last_parent_s": ordered[-1],
            "median_parent_s": statistics.median(ordered), "hung_parent_s": parents[HUNG],
            "others_last_parent_s": max(v for k, v in parents.items() if k != HUNG),
            "hung_card_s": cards[HUNG], "last_card_s": max(cards.values()),
            "parents": len(standin.top_level(CHANNEL)), "incidents": len(ids)}


def _all_shown(standin: SlackStandIn, store: Any, ids: dict[str, str]) -> bool:
    """Every incident diagnosed and its message showing the diagnosis."""
    for iid in ids.values():
        incident = store.require(iid)
        if incident.state in (IncidentState.OPEN, IncidentState.DIAGNOSING) or not incident.chat:
            return False
        shown = standin.messages.get((incident.chat.channel, incident.chat.ts))
        if shown is None or MARK in json.dumps(shown):
            return False
    return True


def _parent_at(calls: list[Call], incident_id: str) -> float:
    """When the incident's top-level message was posted (its outbox key in the metadata)."""
    return min(c.at for c in calls if c.method == "chat.postMessage"
               and not c.params.get("thread_ts")
               and _key(c).startswith(f"{incident_id}/"))


def _card_at(calls: list[Call], incident_id: str, ts: str) -> float:
    """When the incident's message first showed the diagnosis: its post (before) or the
    edit of its alert card."""
    return min(c.at for c in calls if MARK not in json.dumps(c.params) and (
        (c.method == "chat.update" and c.params.get("ts") == ts)
        or (c.method == "chat.postMessage" and not c.params.get("thread_ts")
        and _key(c).startswith(f"{incident_id}/"))))


def _key(call: Call) -> str:
    meta = call.params.get("metadata")
    payload = meta.get("event_payload") if isinstance(meta, dict) else None
    return str(payload.get("key") or "") if isinstance(payload, dict) else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=12)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.hosts < int(HUNG.removeprefix("gpu-")):
        ap.error(f"--hosts must be at least 7: {HUNG} is the host whose nvidia-smi hangs")
    work = Path(tempfile.mkdtemp(prefix="ib-first-"))
    redis = start_local_redis(work / "redis")
    seed = start_sim("seed", workdir=work / "seed")
    hung = start_sim("gpu_smi_hang", workdir=work / "hung")
    names = [f"gpu-{n:02d}" for n in range(1, args.hosts + 1)]
    hosts = {n: (hung if n == HUNG else seed) for n in names}
    results: dict[str, Any] = {"hosts": args.hosts}
    try:
        for label, (card, first) in SETTINGS.items():
            r = results[label] = one_run(redis.url, hosts, card, first)
            print(f"{label:28s} parents: first {r['first_parent_s']:.2f} s, median "
                  f"{r['median_parent_s']:.2f} s, last {r['last_parent_s']:.2f} s "
                  f"(hung host {r['hung_parent_s']:.2f} s, others' last "
                  f"{r['others_last_parent_s']:.2f} s); full cards: hung host "
                  f"{r['hung_card_s']:.2f} s, last {r['last_card_s']:.2f} s; "
                  f"{r['parents']} parents for {r['incidents']} incidents", flush=True)
    finally:
        seed.stop()
        hung.stop()
        redis.stop()
    ours, before = results["alert card + parents first"], results["before"]
    print(f"last parent: before {before['last_parent_s']:.2f} s / ours "
          f"{ours['last_parent_s']:.2f} s = {before['last_parent_s'] / ours['last_parent_s']:.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
