"""A card's last edit in a channel at Slack's post pace, behind its own thread replies
(issue 39).

The chaos run saw an incident's card say "Fixed" ten seconds after the bot knew it, and
a minute after when faults piled up: each incident's outbox items went in order, and the
card's edit waited behind the incident's own replies (the evidence table, the action's
result line) which wait for the channel's post budget (about one post a second per
channel, shared by every incident). Edits have their own budget.

Setup: a real redis-server, the Slack stand-in over HTTP, the backend ``serve`` runs (the
shared Slack budget in Redis) and one outbox retry loop. ``--incidents`` cards are posted
first; then each incident queues, at once, two thread replies and the edit of its card to
its final state. Measured: seconds from that moment to each card's final edit reaching
the stand-in, and to the last reply. Two settings, each on a clean database:

- in order: every item waits behind its incident's head (``ChatOutboxStore(
  edits_overtake=False)``, before issue 39);
- edits overtake: an edit may pass its incident's thread replies waiting for the channel
  (as shipped); posts keep their order.

The ratio printed is the in-order setting's last card edit over ours (higher is better
for us). Nothing is asserted.

Run: python bench/card_behind_replies.py [--incidents 12] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from slack_sdk import WebClient

from bot.chat.base import ChatMessage, MessageRef
from bot.chat.outbox import CARD, ChatOutbox
from bot.chat.slack import shared_backend
from bot.rig.localredis import start_local_redis
from bot.rig.slack_standin import SlackStandIn
from storage.chat_outbox import ChatOutboxStore, Op
from storage.connection import connect
from storage.stores import open_stores

CHANNEL, TOKEN = "C0BENCH", "xoxb-bench"
SETTLE_S = 300.0


def one_run(redis_url: str, incidents: int, overtake: bool) -> dict[str, Any]:
    connect(redis_url).flushdb()
    stores = open_stores(redis_url)
    with SlackStandIn(token=TOKEN) as standin:
        backend = shared_backend(WebClient(base_url=standin.api_url, token=TOKEN), stores)
        store = ChatOutboxStore(connect(redis_url), edits_overtake=overtake)
        box = ChatOutbox(store, backend)
        stop = threading.Event()
        loop = threading.Thread(target=box.run, args=(stop,), daemon=True)
        loop.start()
        try:
            ids = [f"INC-{n + 1}" for n in range(incidents)]
            for iid in ids:
                box.send(iid, CARD, Op.POST, ChatMessage(text=f"{iid}: diagnosing"), CHANNEL)
            _wait(lambda: all(box.posted(i, CARD) for i in ids), "the cards")
            start = time.monotonic()
            for iid in ids:
                ref = box.posted(iid, CARD)
                assert ref is not None
                for purpose in ("evidence", "result"):
                    box.send(iid, purpose, Op.POST, ChatMessage(text=f"{iid} {purpose}"),
                             CHANNEL, thread_of=CARD, deliver=False)
                box.send(iid, CARD, Op.UPDATE, ChatMessage(text=f"{iid}: Fixed"), CHANNEL,
                         ref=MessageRef(ref.channel, ref.ts), deliver=False)
            _wait(lambda: all(store.pending(i) == 0 for i in ids), "the outbox to empty")
        finally:
            stop.set()
            loop.join(timeout=10)
            backend.close(timeout_s=5)
        edits = [c.at - start for c in standin.calls_of("chat.update")
                 if str(c.params.get("text", "")).endswith(": Fixed")]
        replies = [c.at - start for c in standin.calls_of("chat.postMessage")
                   if c.params.get("thread_ts")]
    return {"last_card_s": max(edits), "median_card_s": statistics.median(edits),
            "last_reply_s": max(replies), "cards": len(edits), "replies": len(replies)}


def _wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what}: not within {SETTLE_S:.0f}s")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--incidents", type=int, default=12)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    redis = start_local_redis()
    try:
        rows = {"in order": one_run(redis.url, args.incidents, False),
                "edits overtake": one_run(redis.url, args.incidents, True)}
    finally:
        redis.stop()
    print(f"{args.incidents} cards, then per incident 2 thread replies and the card's last "
          "edit queued at once; one post a second per channel")
    print(f"{'setting':<16}{'median card':>13}{'last card':>11}{'last reply':>12}")
    for name, r in rows.items():
        print(f"{name:<16}{r['median_card_s']:>12.1f}s{r['last_card_s']:>10.1f}s"
              f"{r['last_reply_s']:>11.1f}s")
    ratio = rows["in order"]["last_card_s"] / max(rows["edits overtake"]["last_card_s"], 1e-3)
    print(f"last card edit: in order / edits overtake = {ratio:.1f}x")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratio": ratio}, indent=2))


if __name__ == "__main__":
    main()
