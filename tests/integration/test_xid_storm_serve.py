"""An Xid storm through ``serve``: 500 Xid 45 alerts from 3 Slurm nodes, posted to the
generic webhook in batches as a monitoring system would, give 3 incidents and 3 messages
(each with its count, "Xid 45 ×167 since …"), no drain proposed and no page; an Xid 79
folding in beside one of them makes that incident page.

Real: redis-server, three sim hosts (xid45_storm) over OpenSSH sshd, our service on
uvicorn with its consumer; the paging loop as ``bot/service.py`` runs it. Stand-ins: Slack's
Web API and PagerDuty's Events API.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bot.config.settings import Settings
from bot.domain.paging import PagingPolicy
from bot.paging.client import EventsV2Client
from bot.paging.service import PagingService, PagingStores
from bot.rig.pagerduty_standin import PagerDutyStandIn
from storage.stores import open_stores
from tests.fixtures.bots import CHANNEL, ONCALL, SECRET, TOKEN, Loop, loop, wait_until  # noqa: F401
from tests.fixtures.sim import SimFactory

ALERT_TOKEN = "storm-alert-token"
HOSTS = ("gpu-01", "gpu-02", "gpu-03")


@pytest.fixture
def pager() -> Iterator[PagerDutyStandIn]:
    standin = PagerDutyStandIn().start()
    yield standin
    standin.stop()


def storm_settings(redis_url: str, lp: Loop, sims: dict[str, Any]) -> Settings:
    return Settings.model_validate({
        "redis_url": redis_url,
        "hosts": {name: {"ssh": s.target, "key": str(s.key_path), "gpus": 8,
                         "known_hosts": str(s.known_hosts_path), "slurm_node": name}
                  for name, s in sims.items()},
        "slack": {"channel": CHANNEL, "approvers": [ONCALL], "api_url": lp.standin.api_url},
        "alerts": {"group_wait_s": 30},  # grouping on: an application's storm still stands alone
        "extra": {"scheduler": {"enabled": False}},
        "slack_signing_secret": SECRET, "slack_bot_token": TOKEN,
        "incident_bot_alert_token": ALERT_TOKEN})


def xid_alert(host: str, n: int, xid: int = 45, gpu: str = "1") -> dict[str, Any]:
    return {"host": host, "kind": "gpu_xid", "severity": "critical", "id": f"{host}-{xid}-{n}",
            "summary": f"GPU {gpu} on {host} raised Xid {xid}", "labels": {"gpu": gpu},
            "fingerprint": f"{host}-gpu{gpu}-xid{xid}"}


def post(url: str, alerts: list[dict[str, Any]]) -> None:
    reply = httpx.post(f"{url}/alerts", json=alerts, timeout=30,
                       headers={"Authorization": f"Bearer {ALERT_TOKEN}"})
    assert reply.status_code == 200, reply.text


def top_level_posts(lp: Loop) -> list[dict[str, Any]]:
    return [c.params for c in lp.standin.calls_of("chat.postMessage")
            if not c.params.get("thread_ts")]


def test_500_xid45_alerts_from_3_hosts(loop: Loop, redis_url: str,  # noqa: F811
                                       sim_factory: SimFactory,
                                       pager: PagerDutyStandIn) -> None:
    sims = {h: sim_factory("xid45_storm") for h in HOSTS}
    bot = loop.start(storm_settings(redis_url, loop, sims))
    alerts = [xid_alert(HOSTS[i % 3], i) for i in range(500)]
    for start in range(0, 500, 100):
        post(bot.served.url, alerts[start:start + 100])

    f = loop.flow
    incidents = wait_until(lambda: len(f.incidents.list(open_only=True)) == 3
                           and f.incidents.list(open_only=True), 30, "3 incidents")
    assert sorted((i.host, i.count, i.severity.value) for i in incidents) == [
        ("gpu-01", 167, "warning"), ("gpu-02", 167, "warning"), ("gpu-03", 166, "warning")]
    for i in incidents:
        loop.wait_text(i.id, json.dumps(f"Xid 45 ×{i.count} since")[1:-1])  # as json.dumps
        plans = [p.action.kind for p in f.incidents.require(i.id).plans]
        assert "slurm.drain" not in plans, plans
    assert f.outbox.flush(15)
    assert len(top_level_posts(loop)) == 3  # one message per host, edits for the rest
    text = json.dumps(loop.message(incidents[0].id), ensure_ascii=False)
    assert "the application's Xid: no drain, no page on its own" in text

    stores = open_stores(redis_url)
    paging = PagingService(PagingStores.of(stores), PagingPolicy(after_s=0, timeout_s=2),
                           EventsV2Client(pager.url, "P" * 32, 2))
    quiet = paging.tick()
    assert not [q for q in quiet.queued if q.startswith("trigger")], quiet
    assert pager.requests == 0

    post(bot.served.url, [xid_alert("gpu-01", 900, xid=79, gpu="3")])  # a hardware Xid beside
    lost = next(i for i in f.incidents.list(open_only=True) if i.host == "gpu-01")
    wait_until(lambda: f.incidents.require(lost.id).severity.value == "critical", 10,
               "the hardware Xid to make it critical")
    paged = paging.tick()
    assert paged.queued == [f"trigger {lost.id}"], paged
    stores.close()
    print(os.linesep.join(str(p.get("text")) for p in top_level_posts(loop)))
