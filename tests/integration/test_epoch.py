"""The data epoch on a real Redis (issue 39): begun once, read back, rotated only while it
is still the one a replica saw, the incident counter only ever raised, one announcement
per lost epoch."""

from __future__ import annotations

from redis import Redis

from storage import keys
from storage.epoch import EpochStore


def test_the_first_replica_begins_the_epoch_and_the_others_join_it(redis: Redis) -> None:
    a, b = EpochStore(redis), EpochStore(redis)
    first = a.begin()
    assert b.begin() == first == a.read()
    redis.flushdb()  # the data lost: a new epoch, never the old one
    assert a.read() is None
    assert b.begin() != first


def test_rotation_is_compare_and_set(redis: Redis) -> None:
    store = EpochStore(redis)
    old = store.begin()
    new = store.rotate(old)
    assert new != old and store.read() == new
    assert store.rotate(old) == new  # a second replica noticing the same loss agrees


def test_the_counter_only_goes_up_and_one_replica_announces(redis: Redis) -> None:
    store = EpochStore(redis)
    redis.set(keys.incident_seq(), 64)
    assert store.raise_counter(1064) == 1064 and store.incident_counter() == 1064
    assert store.raise_counter(10) == 1064
    lost = store.begin()
    assert store.claim_announcement(lost, "replica-a")
    assert not store.claim_announcement(lost, "replica-b")
