"""The App Home through the assembled service: ``serve``'s Slack app answers a signed
``app_home_opened`` with the fleet from Redis, and republishes when an incident changes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis import Redis

from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost
from tests.fixtures.slack import served_bot

SECRET, TOKEN, CHANNEL, USER = "home-secret", "xoxb-home", "C0INCIDENT", "UALICE"


@pytest.fixture
def bot(redis: Redis, redis_url: str, sim_factory: Callable[..., SimHost]) -> Iterator[Any]:
    sim = sim_factory("seed")
    with served_bot(redis_url, sim, SECRET, TOKEN, CHANNEL, USER, host={"gpus": 8}) as served:
        yield served


def home_opened(user: str) -> str:
    return json.dumps({"type": "event_callback", "team_id": "T0001", "api_app_id": "A1",
                       "event_id": f"Ev{user}", "event_time": int(time.time()),
                       "event": {"type": "app_home_opened", "user": user, "tab": "home",
                                 "channel": "D1"}})


def shown(view: dict[str, Any]) -> str:
    return "\n".join(b["text"]["text"] for b in view["blocks"] if b["type"] == "section")


def posted_incident(service: Any) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the message ref is written right after the post
        found = service.flow.incidents.list(open_only=True)
        if found and found[0].chat is not None:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("the incident was never posted")


def wait_view(standin: SlackStandIn, user: str, want: str, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = shown(standin.home.get(user) or {"blocks": []})
        if want in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"the Home never showed {want!r}: {standin.home.get(user)}")


def test_home_tab_shows_the_open_incident_and_follows_its_state(bot: Any) -> None:
    service, standin, sender = bot
    assert service.chat_app is not None and service.chat_app.home is not None
    samples = service.stores.samples()  # what the sampler would have written
    for gpu in range(6):  # 6 of 8 report: the other two count as broken
        samples.add_many("gpu-01", time.time() - 20, [(f"gpu{gpu}.mem_used_mib", 77_600),
                                                      (f"gpu{gpu}.util_pct", 0)])
    sender.slash(USER, "/ir", "diag gpu-01 vram_idle")
    incident = posted_incident(service)

    assert sender.post(home_opened(USER)).status_code == 200
    (first,) = standin.wait_for("views.publish", 1, 30)
    assert first.params["user_id"] == USER
    text = shown(standin.home[USER])
    state = incident.state.value.replace("_", " ")
    assert f"*{incident.id}* gpu-01 · vram_idle · {state} · open under 1 min" in text
    assert "8 GPUs: 0 busy · 6 held idle · 0 free · 2 broken" in text, "newest samples count"

    sender.slash(USER, "/ir", f"resolve {incident.id}")
    after = wait_view(standin, USER, "_Nothing open._")
    assert incident.id not in after
    assert len(standin.calls_of("views.publish")) >= 2
    assert service.flow.incidents.require(incident.id).state.value == "resolved"
