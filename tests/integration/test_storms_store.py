"""Storm placement on a real redis-server (issue 37): above the rate an incident joins its
kind's storm; the decision is taken once and kept; a storm's start takes in the same kind's
arrivals whose own message has not gone out yet; replicas placing at once agree."""

from __future__ import annotations

import threading

from redis import Redis

from storage import keys
from storage.storms import StormStore

CARD = "incident-card"
T = 1_800_000_000.0


def place(store: StormStore, incident: str, kind: str = "vram_idle", at: float = T,
          channel: str = "C1") -> str | None:
    got = store.place(incident, kind, channel, at, CARD)
    return got.storm.id if got.storm is not None else None


def test_the_rate_starts_a_storm_per_kind_and_the_decision_is_kept(redis: Redis) -> None:
    store = StormStore(redis, threshold=3)
    assert [place(store, str(n), at=T + n) for n in range(1, 4)] == [None, None, None]
    # the 4th new incident of the minute in the channel starts a storm of its kind
    fourth = store.place("4", "vram_idle", "C1", T + 4, CARD)
    assert fourth.storm is not None and fourth.started and fourth.storm.kind == "vram_idle"
    storm = fourth.storm.id
    # its first three were posted already (their card is in the outbox's posted hash)? no:
    # none was, so the start took them in too: nothing waits behind the storm's message
    assert store.members(storm) == ["1", "2", "3", "4"]
    assert place(store, "5", at=T + 5) == storm  # the storm collects its kind
    assert place(store, "6", "disk_full", at=T + 6) not in (None, storm)  # its own storm
    assert place(store, "1", at=T + 100) == storm  # asked again: the same answer
    assert store.storm_of("5") == storm and store.storm_of("nope") is None


def test_a_message_already_out_keeps_its_own_place(redis: Redis) -> None:
    store = StormStore(redis, threshold=2)
    place(store, "1"), place(store, "2", at=T + 1)
    redis.hset(keys.outbox_posted("1"), CARD, "{}")  # incident 1's card went out
    storm = place(store, "3", at=T + 2)
    assert storm is not None and store.members(storm) == ["2", "3"]
    assert store.storm_of("1") is None


def test_a_card_being_sent_keeps_its_own_place(redis: Redis) -> None:
    """Claimed by a sender (its post may be reaching Slack right now): not taken in."""
    from storage.chat_outbox import ChatOutboxStore, NewItem, Op

    outbox, store = ChatOutboxStore(redis), StormStore(redis, threshold=2)
    place(store, "1"), place(store, "2", at=T + 1)
    outbox.append("1", NewItem(Op.POST, CARD, "{}", "C1"), T)
    outbox.append("2", NewItem(Op.POST, CARD, "{}", "C1"), T)
    assert outbox.claim("1", T + 2, "sender-a") is not None
    storm = place(store, "3", at=T + 2)
    assert storm is not None and store.members(storm) == ["2", "3"]


def test_a_card_whose_try_may_have_gone_out_keeps_its_own_place(redis: Redis) -> None:
    """A try that timed out (given back uncertain: Slack may have posted it at the top of
    the channel) is not taken in: its retry would look for it in the storm's thread, find
    nothing, and post a second card (chaos seed 4242, gpu-06 #190). One refused for sure
    (a 500, a 429) may still join."""
    from storage.chat_outbox import ChatOutboxStore, NewItem, Op

    outbox, store = ChatOutboxStore(redis), StormStore(redis, threshold=2)
    place(store, "1"), place(store, "2", at=T + 1)
    for incident in ("1", "2"):
        outbox.append(incident, NewItem(Op.POST, CARD, "{}", "C1"), T)
    timed_out, refused = outbox.claim("1", T + 1, "a"), outbox.claim("2", T + 1, "b")
    assert timed_out is not None and refused is not None
    assert outbox.release(timed_out, T + 3, "TimeoutError: timed out", uncertain=True)
    assert outbox.release(refused, T + 3, "500", uncertain=False)
    storm = place(store, "3", at=T + 2)
    assert storm is not None and store.members(storm) == ["2", "3"]
    assert store.storm_of("1") is None


def test_old_arrivals_age_out_and_a_quiet_storm_ends(redis: Redis) -> None:
    store = StormStore(redis, threshold=2, window_s=60, quiet_s=0.2)
    place(store, "1"), place(store, "2", at=T + 1)
    assert place(store, "3", at=T + 90) is None  # the first two are older than the window
    place(store, "4", at=T + 91)
    storm = place(store, "5", at=T + 92)
    assert storm is not None
    assert store.active("C1", "vram_idle") == storm
    redis.pexpire(keys.storm_active("C1", "vram_idle"), 1)  # a quiet spell
    threading.Event().wait(0.05)
    assert store.active("C1", "vram_idle") is None
    later = place(store, "6", at=T + 93)  # still above the rate: a new storm
    assert later is not None and later != storm


def test_replicas_placing_at_once_agree_on_one_storm(redis: Redis) -> None:
    stores = [StormStore(redis, threshold=5) for _ in range(4)]
    got: dict[str, str | None] = {}
    lock = threading.Lock()

    def replica(n: int) -> None:
        for i in range(n, 200, 4):
            storm = place(stores[n], f"i{i}", at=T + i / 100)
            with lock:
                got[f"i{i}"] = storm

    threads = [threading.Thread(target=replica, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    storms = {s for s in got.values() if s is not None}
    assert len(storms) == 1, storms
    storm = storms.pop()
    own = [i for i, s in got.items() if s is None]
    members = stores[0].members(storm)
    # every incident is in exactly one place: its own message, or the one storm
    assert sorted(members + [i for i in own if stores[0].storm_of(i) is None]) == sorted(got)
    assert len(members) >= 195  # at most the first five (and none posted, so all taken in)


def test_storms_off_places_nothing(redis: Redis) -> None:
    store = StormStore(redis, threshold=0)
    assert all(place(store, str(n)) is None for n in range(50))
    assert not redis.exists(keys.storm_placed())
