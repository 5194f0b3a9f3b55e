"""Paging beside the assembled ``serve``: Slack's /ir ack and resolve reach PagerDuty.

The bot is the real service (HTTP, Bolt, the flow, a sim host over sshd) against the Slack
stand-in; two paging replicas tick in their own threads, as ``bot/service.py`` would run
them, against the Events v2 stand-in. The incident pages once, the ack typed in Slack
acknowledges it, the resolve resolves it, each exactly once.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis import Redis

from bot.domain.paging import PagingPolicy
from bot.paging.client import EventsV2Client
from bot.paging.runner import run_forever
from bot.paging.service import PagingService, PagingStores
from bot.rig.pagerduty_standin import PagerDutyStandIn
from bot.sim.sshd import SimHost
from tests.fixtures.bots import wait_until
from tests.fixtures.slack import served_bot

SECRET, TOKEN, CHANNEL, USER = "paging-secret", "xoxb-paging", "C0INCIDENT", "UALICE"
KEY = "P" * 32


@pytest.fixture
def bot(redis: Redis, redis_url: str, sim_factory: Callable[..., SimHost]) -> Iterator[Any]:
    with served_bot(redis_url, sim_factory("seed"), SECRET, TOKEN, CHANNEL, USER) as served:
        yield served


@pytest.fixture
def pager(redis_url: str) -> Iterator[PagerDutyStandIn]:
    from storage.stores import open_stores

    standin = PagerDutyStandIn().start()
    stop = threading.Event()
    policy = PagingPolicy(after_s=0, severities=("critical", "warning", "info"), timeout_s=2)

    def replica() -> None:
        stores = PagingStores.of(open_stores(redis_url))
        service = PagingService(stores, policy, EventsV2Client(standin.url, KEY, 2))
        run_forever(service, stop, every_s=0.05)  # what bot/service.py's thread would run

    threads = [threading.Thread(target=replica, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    yield standin
    stop.set()
    for t in threads:
        t.join(timeout=10)
    standin.stop()


def test_slack_ack_and_resolve_reach_pagerduty_once_each(bot: Any,
                                                         pager: PagerDutyStandIn) -> None:
    _, standin, sender = bot
    assert sender.slash(USER, "/ir", "diag gpu-01 vram_idle").status_code == 200
    reply = str(standin.wait_for("response_url", 1, 30)[0].params.get("text"))
    incident_id = re.search(r"INC-\d+", reply).group(0)  # type: ignore[union-attr]
    wait_until(lambda: pager.actions(incident_id) == ["trigger"], 30, "the page")
    assert sender.slash(USER, "/ir", f"ack {incident_id}").status_code == 200
    wait_until(lambda: pager.actions(incident_id)[-1:] == ["acknowledge"], 30, "the ack")
    assert sender.slash(USER, "/ir", f"resolve {incident_id}").status_code == 200
    wait_until(lambda: pager.alerts().get(incident_id) == "resolved", 30, "the resolve")
    assert pager.actions(incident_id) == ["trigger", "acknowledge", "resolve"]
    trigger = pager.events[0].body["payload"]
    assert trigger["source"] == "gpu-01" and incident_id in trigger["summary"]
