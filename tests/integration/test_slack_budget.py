"""The Slack budget shared in Redis: a 429 holds back only its own message, and replicas
together stay within the workspace's tier rate. Real Redis, real HTTP to the stand-in."""

from __future__ import annotations

from redis import Redis

from bot.chat.base import ChatMessage, MessageRef
from bot.chat.slack import SlackBackend, make_client
from bot.rig.slack_standin import SlackStandIn
from storage.renders import RenderLedger
from storage.slack_budget import BudgetSettings, SlackBudget, workspace_of
from tests.fixtures.slack import BOT_TOKEN, CHANNEL, slack_test_settings

MSG = ChatMessage(text="gpu-01: 8 GPUs held idle", incident_id="42")
# the budget spaces the slots it hands out; what reaches the stand-in is a slot plus the
# sender's own scheduling and HTTP time, which a loaded machine stretches for one send and
# not the next: arrivals may sit this much closer than their slots
JITTER_S = 0.15


def replica(standin: SlackStandIn, redis: Redis, settings: BudgetSettings | None = None,
            interval_s: float = 0.2) -> SlackBackend:
    budget = SlackBudget(redis, workspace_of(BOT_TOKEN), settings) if settings else None
    budget = budget or SlackBudget(redis, workspace_of(BOT_TOKEN),
                                   BudgetSettings(message_interval_s=interval_s))
    return SlackBackend(make_client(slack_test_settings(standin)), ledger=RenderLedger(redis),
                        update_interval_s=interval_s, budget=budget)


def test_a_429_requeues_only_that_message(slack_standin: SlackStandIn, redis: Redis) -> None:
    one, two = replica(slack_standin, redis), replica(slack_standin, redis)
    a = one.post(CHANNEL, MSG)
    b = one.post("C0OTHER", MSG)  # another incident's message
    slack_standin.rate_limit("chat.update", times=1, retry_after=3)
    one.update(a, ChatMessage(text="a 1"))
    slack_standin.wait_for("chat.update", 1)
    one.update(b, ChatMessage(text="b 1"))
    two.update(a, ChatMessage(text="a from two"))  # the other replica honours the hold too
    seen = slack_standin.wait_for("chat.update", 2, timeout_s=10.0)
    # the next edit to reach Slack is the other message's: it did not queue behind the 429
    assert [(c.params["ts"], c.params["text"]) for c in seen] == [(a.ts, "a 1"), (b.ts, "b 1")]
    one.update(a, ChatMessage(text="a 2"))  # newer content for the waiting message wins
    assert one.flush(10) and two.flush(10)
    mine = [c for c in slack_standin.calls_of("chat.update") if c.params["ts"] == a.ts]
    assert mine[0].params["text"] == "a 1" and mine[1].params["text"] in ("a 2", "a from two")
    assert mine[1].at - mine[0].at >= 2.9, "no replica edited it before Retry-After"
    assert slack_standin.messages[(CHANNEL, a.ts)]["text"] in ("a 2", "a from two")
    assert slack_standin.messages[("C0OTHER", b.ts)]["text"] == "b 1"
    one.close()
    two.close()


def test_two_replicas_together_stay_within_the_tier(slack_standin: SlackStandIn,
                                                     redis: Redis) -> None:
    per_s, burst = 6.0, 2
    settings = BudgetSettings(per_minute={"chat.update": per_s * 60}, burst=burst,
                              message_interval_s=0.05)
    one, two = (replica(slack_standin, redis, settings, 0.05) for _ in range(2))
    refs = [one.post(f"C{i:03d}", MSG) for i in range(12)]  # one post per channel: no wait
    for n, ref in enumerate(refs):
        one.update(ref, ChatMessage(text=f"one {n}"))
        two.update(MessageRef(ref.channel, ref.ts), ChatMessage(text=f"two {n}"))
    assert one.flush(20) and two.flush(20)
    calls = slack_standin.calls_of("chat.update")
    assert len(calls) == 24 and all(c.params.get("text") for c in calls)
    span = calls[-1].at - calls[0].at
    assert len(calls) <= burst + per_s * span + 1, (len(calls), span)
    for i in range(len(calls) - 7):  # any 7 in a row needed at least (7 - burst) intervals
        assert calls[i + 6].at - calls[i].at >= (6 - (burst - 1)) / per_s - JITTER_S
    one.close()
    two.close()


def test_posts_in_one_channel_are_spaced_across_replicas(slack_standin: SlackStandIn,
                                                         redis: Redis) -> None:
    one, two = replica(slack_standin, redis), replica(slack_standin, redis)
    for chat in (one, two, one):
        chat.post(CHANNEL, MSG)
    first, second, third = slack_standin.calls_of("chat.postMessage")
    assert second.at - first.at >= 1.0 - JITTER_S and third.at - second.at >= 1.0 - JITTER_S
    one.close()
    two.close()


def test_an_urgent_edit_keeps_the_tiers_last_call_for_itself(redis: Redis) -> None:
    """Three edits of the tier's burst: two ordinary ones go, the third waits, and an
    urgent one (a storm's table, issue 37) still goes; under a burst the ordinary edits
    wait for the table, never the other way round."""
    budget = SlackBudget(redis, "ws-urgent", BudgetSettings(per_minute={"chat.update": 6.0},
                                                            burst=3, message_interval_s=0.0))
    assert budget.try_update("C1", "1.1") == 0
    assert budget.try_update("C1", "1.2") == 0
    assert budget.try_update("C1", "1.3") > 0, "the last call of the burst is kept"
    assert budget.try_update("C1", "9.9", urgent=True) == 0
    assert budget.try_update("C1", "9.9", urgent=True) > 0, "and then the tier is spent"
