"""The first message goes out when the diagnosis starts, whatever the probes do (issue 29):
through ``serve`` (the assembled service, real Redis, simulated hosts over a real sshd,
the Slack stand-in), a host whose ``nvidia-smi`` hangs has its message while it is still
``diagnosing``, and the same message is edited into the full card when the probe times
out. Twelve alerts at once: every parent is in Slack before the hung host's diagnosis
ends, and each incident has exactly one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bot.config.settings import Settings
from bot.core import strings
from bot.domain.findings import Severity
from bot.domain.incident import Alert, Incident
from bot.domain.lifecycle import IncidentState
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

S = IncidentState
DIAGNOSING_MARK = strings.MSG_ALERT_DIAGNOSING.split("…")[0]


def settings(redis_url: str, hosts: dict[str, SimHost], api_url: str,
             probe_timeout_s: float) -> Settings:
    def host(sim: SimHost) -> dict[str, str]:
        return {"ssh": sim.target, "key": str(sim.key_path),
                "known_hosts": str(sim.known_hosts_path)}

    return Settings.model_validate({
        "redis_url": redis_url, "hosts": {name: host(sim) for name, sim in hosts.items()},
        # every incident's own parent is what is measured here: no storm (issue 37)
        "slack": {"channel": CHANNEL, "approvers": [ONCALL], "api_url": api_url,
                  "storm": {"per_minute": 0}},
        "alerts": {"group_wait_s": 0},
        "extra": {"scheduler": {"enabled": False},
                  "diagnostics": {"command_timeout_s": probe_timeout_s}},
        "slack_signing_secret": SECRET, "slack_bot_token": TOKEN})


def alert(host: str) -> Alert:
    return Alert(source="test", host=host, kind="vram_idle", severity=Severity.CRITICAL,
                 summary="GPU memory held at 0% utilisation",
                 labels={"alertname": "GpuVramHeldIdle", "gpu": "0-7", "instance": host})


def shown(world: Loop, incident: Incident) -> str:
    """The incident's message as the stand-in holds it now (text and blocks)."""
    assert incident.chat is not None
    return json.dumps(world.standin.messages[(incident.chat.channel, incident.chat.ts)])


def posted_top_level(world: Loop) -> list[dict[str, Any]]:
    return world.standin.top_level(CHANNEL)


def test_a_hung_probe_still_gets_its_message_at_once_then_the_same_one_is_edited(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:  # noqa: F811
    hung = sim_factory("gpu_smi_hang")
    loop.start(settings(redis_url, {"gpu-09": hung}, loop.standin.api_url, 10.0))
    store = loop.flow.incidents
    opened, _ = store.open_or_fold(alert("gpu-09"))

    first = wait_until(lambda: store.require(opened.id).chat, 30, "the first message")
    now = store.require(opened.id)
    assert now.state is S.DIAGNOSING, "the message is posted while nvidia-smi still hangs"
    text = shown(loop, now)
    assert DIAGNOSING_MARK in text and "GPU memory held at 0% utilisation" in text
    assert "gpu=0-7" in text and "instance=" not in text  # the labels that say more

    wait_until(lambda: store.require(opened.id).state is not S.DIAGNOSING, 60,
               "the diagnosis to end (nvidia-smi timed out)")
    settled = store.require(opened.id)
    assert settled.diagnosis is not None and settled.chat == first  # the same message
    assert any("nvidia-smi" in f.title for f in settled.diagnosis.findings)
    wait_until(lambda: DIAGNOSING_MARK not in shown(loop, settled), 30, "the edit")
    card = loop.flow.publisher.render_stored(settled)
    assert card is not None and "nvidia-smi" in card.text  # the real headline
    wait_until(lambda: loop.standin.messages[(first.channel, first.ts)]["text"] == card.text,
               30, "the full card's text on the first message")
    assert len(posted_top_level(loop)) == 1, "one parent per incident, never two"
    assert any(c.params.get("ts") == first.ts for c in loop.standin.calls_of("chat.update"))


def test_twelve_alerts_at_once_every_parent_before_the_hung_host_is_diagnosed(
        loop: Loop, redis_url: str, sim_factory: Callable[..., SimHost]) -> None:  # noqa: F811
    """Eleven hosts answer, one hangs: every parent is in Slack while the hung host is
    still diagnosing (its probe's deadline, 30 s here, is far past Slack's pace of a post
    a second), and each incident ends with exactly one parent."""
    seed, hung = sim_factory("seed"), sim_factory("gpu_smi_hang")
    names = [f"gpu-{n:02d}" for n in range(1, 13)]
    hosts = {name: (hung if name == "gpu-07" else seed) for name in names}
    loop.start(settings(redis_url, hosts, loop.standin.api_url, 30.0))
    store = loop.flow.incidents
    ids = {name: store.open_or_fold(alert(name))[0].id for name in names}

    wait_until(lambda: all(store.require(i).chat is not None for i in ids.values()), 90,
               "every incident's parent message")
    assert store.require(ids["gpu-07"]).state is S.DIAGNOSING, "gpu-07 still waits on its probe"
    assert len(posted_top_level(loop)) == 12

    wait_until(lambda: all(store.require(i).state is not S.DIAGNOSING for i in ids.values()),
               120, "every diagnosis to end")
    wait_until(lambda: not any(DIAGNOSING_MARK in shown(loop, store.require(i))
                               for i in ids.values()), 60, "every card edited into its diagnosis")
    parents = posted_top_level(loop)
    assert len(parents) == 12, "exactly one parent per incident"
    assert {str(p["ts"]) for p in parents} == {
        store.require(i).chat.ts for i in ids.values()}  # type: ignore[union-attr]
