"""Usergroup membership shared in Redis: two replicas ask Slack once per group per TTL."""

from __future__ import annotations

from redis import Redis

from bot.chat.shared_groups import SharedSlackGroups
from bot.chat.slack import make_client
from bot.rig.slack_standin import SlackStandIn
from storage.usergroups import UsergroupCache
from tests.fixtures.slack import slack_test_settings


def test_two_replicas_share_one_lookup(slack_standin: SlackStandIn, redis: Redis) -> None:
    slack_standin.groups["S0GPUOPS"] = ["UBOB"]
    one, two = (SharedSlackGroups(make_client(slack_test_settings(slack_standin)),
                                  UsergroupCache(redis)) for _ in range(2))
    assert one.groups_of("UBOB", frozenset({"S0GPUOPS"})) == {"S0GPUOPS"}
    assert two.groups_of("UBOB", frozenset({"S0GPUOPS"})) == {"S0GPUOPS"}
    assert two.groups_of("UALICE", frozenset({"S0GPUOPS"})) == frozenset()
    assert len(slack_standin.calls_of("usergroups.users.list")) == 1
    assert 0 < int(redis.pttl("ib:slack:usergroup:S0GPUOPS")) <= 300_000  # type: ignore[arg-type]


def test_expired_entries_are_asked_again(slack_standin: SlackStandIn, redis: Redis) -> None:
    slack_standin.groups["S0GPUOPS"] = ["UBOB"]
    groups = SharedSlackGroups(make_client(slack_test_settings(slack_standin)),
                               UsergroupCache(redis), ttl_s=0.0)
    groups.groups_of("UBOB", frozenset({"S0GPUOPS"}))
    redis.delete("ib:slack:usergroup:S0GPUOPS")
    slack_standin.groups["S0GPUOPS"] = ["UCAROL"]
    assert groups.groups_of("UCAROL", frozenset({"S0GPUOPS"})) == {"S0GPUOPS"}
    assert len(slack_standin.calls_of("usergroups.users.list")) == 2
