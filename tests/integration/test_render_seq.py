"""Render sequence numbers: an older render of an incident message never lands last."""

from __future__ import annotations

import threading

from redis import Redis

from bot.chat.base import ChatMessage
from bot.chat.slack import make_client, shared_backend
from bot.rig.slack_standin import SlackStandIn
from storage.renders import RenderLedger
from storage.stores import Stores
from tests.fixtures.slack import slack_test_settings


def test_ledger_applies_only_newer_renders(redis: Redis) -> None:
    ledger = RenderLedger(redis)
    first, second = ledger.next_seq("7"), ledger.next_seq("7")
    assert (first, second) == (1, 2)
    sent: list[int] = []
    assert ledger.send_if_newer("7", second, lambda: sent.append(second))
    assert not ledger.send_if_newer("7", first, lambda: sent.append(first))  # late, older
    assert sent == [2] and ledger.applied("7") == 2
    assert ledger.next_seq("8") == 1  # per incident


def test_concurrent_senders_never_leave_an_older_render_last(redis: Redis) -> None:
    ledger = RenderLedger(redis)
    seqs = [ledger.next_seq("9") for _ in range(20)]
    landed: list[int] = []
    threads = [threading.Thread(target=ledger.send_if_newer,
                                args=("9", s, lambda s=s: landed.append(s))) for s in seqs[::-1]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert landed == sorted(landed) and landed[-1] == 20


def test_slack_backend_drops_a_stale_edit(slack_standin: SlackStandIn, redis: Redis) -> None:
    backend = shared_backend(make_client(slack_test_settings(slack_standin)),
                             Stores(redis, redis), update_interval_s=0.05)
    ledger = RenderLedger(redis)
    seqs = [ledger.next_seq("42") for _ in range(3)]
    ref = backend.post("C1", ChatMessage(text="v1", incident_id="42", seq=seqs[0]))
    backend.update(ref, ChatMessage(text="v3", incident_id="42", seq=seqs[2]))
    backend.flush()
    backend.update(ref, ChatMessage(text="v2", incident_id="42", seq=seqs[1]))  # a late thread
    backend.flush()
    assert slack_standin.messages[(ref.channel, ref.ts)]["text"] == "v3"
    assert [c.params["text"] for c in slack_standin.calls_of("chat.update")] == ["v3"]
    backend.close()
