"""A burst through ``serve`` becomes one growing message (issue 37): the assembled service,
real Redis, simulated hosts behind a real sshd, the Slack stand-in. Above the channel's
rate the incidents of one kind share a storm message whose table lists every host; each
host's card and evidence are posted in the storm's thread; Approve clicked on the table's
row runs that host's action, and the table follows."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bot.config.settings import Settings
from bot.domain.findings import Severity
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from bot.flow.storm import TABLE
from bot.sim.sshd import SimHost
from tests.fixtures.bots import (  # noqa: F401 - ``loop`` is a fixture
    CHANNEL,
    ONCALL,
    SECRET,
    TOKEN,
    Loop,
    loop,
    wait_until,
)
from tests.helpers.blockkit_limits import problems

S = IncidentState
HOSTS = [f"gpu-{n:02d}" for n in range(1, 9)]


def settings(redis_url: str, hosts: dict[str, SimHost], api_url: str) -> Settings:
    def host(sim: SimHost) -> dict[str, str]:
        return {"ssh": sim.target, "key": str(sim.key_path),
                "known_hosts": str(sim.known_hosts_path)}

    return Settings.model_validate({
        "redis_url": redis_url, "hosts": {name: host(sim) for name, sim in hosts.items()},
        "slack": {"channel": CHANNEL, "approvers": [ONCALL], "api_url": api_url,
                  "storm": {"per_minute": 3}},
        "alerts": {"group_wait_s": 0},
        "extra": {"scheduler": {"enabled": False}, "remediation": {"settle_s": 0.3}},
        "slack_signing_secret": SECRET, "slack_bot_token": TOKEN})


def alert(host: str) -> Alert:
    return Alert(source="test", host=host, kind="vram_idle", severity=Severity.CRITICAL,
                 summary="GPU memory held at 0% utilisation")


def storm_message(world: Loop, storm_id: str) -> dict[str, Any] | None:
    posted = world.flow.outbox.posted(storm_id, TABLE)
    return world.standin.messages.get((posted.channel, posted.ts)) if posted else None


def test_a_burst_is_one_growing_message_and_a_person_acts_from_it(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:  # noqa: F811
    seed = sim_factory("seed")
    loop.start(settings(redis_url, {name: seed for name in HOSTS}, loop.standin.api_url))
    flow, store = loop.flow, loop.flow.incidents
    assert flow.storms is not None
    ids = {name: store.open_or_fold(alert(name))[0].id for name in HOSTS}

    storm = wait_until(lambda: flow.storms and flow.storms.storm_of(ids[HOSTS[-1]]), 30,
                       "the burst's storm")
    wait_until(lambda: all(store.require(i).state is S.AWAITING_APPROVAL for i in ids.values()),
               120, "every host diagnosed")
    members = flow.storms.store.members(storm)
    own = [n for n, i in ids.items() if i not in members]
    assert len(own) <= 3, "at most the channel's rate gets its own message"

    def table() -> dict[str, Any] | None:
        shown = storm_message(loop, storm)
        text = json.dumps(shown) if shown else ""
        done = shown and all(n in text for n in HOSTS if ids[n] in members) and \
            text.count('"action_id": "approve"') == len(members)
        return shown if done else None

    shown = wait_until(table, 60, "the table: every member with its Approve")
    assert problems(shown["blocks"]) == []
    top = loop.standin.top_level(CHANNEL)
    assert len(top) == len(own) + 1, "the storm is one message, not one per host"
    assert f"{len(members)} of {len(members)} shown" in json.dumps(shown)

    # each member's card (then its evidence) is a reply in the storm's thread
    storm_ts = str(shown["ts"])
    cards = wait_until(lambda: all(store.require(ids[n]).chat for n in HOSTS if ids[n] in members)
                       and [store.require(ids[n]).chat for n in HOSTS if ids[n] in members],
                       90, "every member's card, at Slack's pace")
    assert all(c.thread_ts == storm_ts and c.ts != storm_ts for c in cards)
    replies = [m for (c, _), m in loop.standin.messages.items()
               if c == CHANNEL and m.get("thread_ts") == storm_ts]
    assert len(replies) >= len(members)

    # Approve on the table's row: that host's action runs, and the table shows it
    target = next(n for n in HOSTS if ids[n] in members)
    approval = store.require(ids[target]).plans[0].approval_id
    response = loop.click(ONCALL, shown, lambda el: el.get("value") == approval)
    assert response.status_code == 200
    loop.wait_state(ids[target], S.VERIFIED, S.RESUMED, timeout_s=90)
    wait_until(lambda: ":white_check_mark:" in json.dumps(storm_message(loop, storm)) or
               ":arrow_forward:" in json.dumps(storm_message(loop, storm)), 30,
               "the table to show the fix")
    after = json.dumps(storm_message(loop, storm))
    assert f'"value": "{approval}"' not in after, "no Approve left on a host that was fixed"
