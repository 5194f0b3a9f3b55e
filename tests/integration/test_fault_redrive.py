"""Every incident settles: real faults in the middle of a diagnosis (issue 24).

Real processes: ``incident-bot serve`` as a child, a private ``redis-server`` with its AOF
(``appendfsync always``), a simulated host behind a real sshd whose ``nvidia-smi`` answers
late, so the diagnosis is still running when the fault hits. Only Slack is a stand-in.
Each fault must end with the incident settled (awaiting_approval or diagnosis_failed)
and exactly one message, within the diagnosing deadline plus one reconciler period.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost
from storage import keys
from storage.connection import connect
from storage.incidents import IncidentStore
from tests.fixtures.alerts import am_alert, am_payload
from tests.helpers.serve_process import (
    BOT_TOKEN,
    CHANNEL,
    ServeProcess,
    bot_config,
    wait_until,
)

HANG_S = 2.0  # each nvidia-smi call answers this late: a diagnosis takes a few seconds
RECONCILE = {"every_s": 1.0, "open_s": 10.0, "diagnosing_s": 20.0, "acting_s": 60.0}
BOUND_S = RECONCILE["diagnosing_s"] + RECONCILE["every_s"]
SETTLED = {IncidentState.AWAITING_APPROVAL, IncidentState.DIAGNOSIS_FAILED}


@dataclass
class Rig:
    redis: LocalRedis
    standin: SlackStandIn
    serve: ServeProcess
    store: IncidentStore

    def one_incident(self, state: IncidentState, timeout_s: float = 30) -> Incident:
        found: list[Incident] = []

        def reached() -> bool:
            found[:] = [i for i in self.store.list() if i.state is state]
            return bool(found)

        assert wait_until(reached, timeout_s), f"no incident reached {state.value}"
        return found[0]

    def settled(self, incident_id: str) -> bool:
        incident = self.store.get(incident_id)
        return incident is not None and incident.state in SETTLED and incident.chat is not None

    def cards(self) -> list[object]:
        """Top-level messages in the incident channel (thread replies excluded)."""
        return [c for c in self.standin.calls_of("chat.postMessage")
                if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")]


@pytest.fixture
def rig(tmp_path: Path, sim_factory: Callable[..., SimHost]) -> Iterator[Rig]:
    sim = sim_factory("seed", overrides={"nvidia": {"hang_s": HANG_S}})
    server = start_local_redis(tmp_path / "redis")
    standin = SlackStandIn(token=BOT_TOKEN).start()
    serve = ServeProcess(tmp_path / "bot.yaml", server.url, tmp_path / "serve.log")
    bot_config(serve.config, sim, standin, serve.port, RECONCILE)
    client = connect(server.url)
    try:
        yield Rig(server, standin, serve.start(), IncidentStore(client))
    finally:
        serve.stop()
        client.close()
        standin.stop()
        server.stop()


def _alert(rig: Rig) -> Incident:
    assert rig.serve.post_alert(am_payload(am_alert("gpu-01"))).status_code == 200
    return rig.one_incident(IncidentState.DIAGNOSING)


def test_redis_killed_mid_diagnosis_and_restarted_from_its_aof(rig: Rig) -> None:
    incident = _alert(rig)
    rig.redis.kill()
    # the diagnosis ends while Redis is gone: its writes are refused, the step is left for
    # a re-drive (issue 39: a refusal is not a bug, no "internal error" is logged)
    assert wait_until(lambda: "cut short, Redis refused" in rig.serve.log(), 60), \
        rig.serve.log()[-3000:]
    rig.redis.start()  # same port, same directory: the AOF is read back
    back = time.monotonic()
    assert wait_until(lambda: rig.settled(incident.id), BOUND_S + 30), rig.serve.log()[-3000:]
    took = time.monotonic() - back
    print(f"redis restart → settled in {took:.1f}s")
    assert len(rig.cards()) == 1
    assert took <= BOUND_S
    assert wait_until(lambda: not rig.store.redis.zcard(keys.incidents_inflight()), 5)
    # re-run once: the consumer re-entering its own step (the event stayed pending), or
    # the reconciler re-driving the step the refusal cut short (issue 39), never both
    actions = [e.action for e in rig.store.audit.timeline(incident.id)]
    assert actions.count("step.reentered") == 1, actions


def test_serve_killed_mid_diagnosis_and_started_again(rig: Rig) -> None:
    incident = _alert(rig)
    rig.serve.kill()
    killed = time.monotonic()
    rig.serve.start()
    ready = time.monotonic()
    assert wait_until(lambda: rig.settled(incident.id), BOUND_S + 60), rig.serve.log()[-3000:]
    took = time.monotonic() - ready
    print(f"serve SIGKILL → settled in {time.monotonic() - killed:.1f}s, "
          f"{took:.1f}s after the new serve answered")
    assert len(rig.cards()) == 1
    assert took <= BOUND_S
    redriven = [e.detail for e in rig.store.audit.timeline(incident.id)
                if e.action == "incident.redriven"]
    assert len(redriven) == 1 and "is gone" in redriven[0]["reason"], redriven
    assert not rig.store.redis.zcard(keys.incidents_inflight())


def test_redis_wiped_mid_diagnosis_is_not_an_error_of_ours(rig: Rig) -> None:
    """Found by the chaos run (seed 8): the diagnosis that ends after Redis lost its data
    finds its incident gone. That is the data-loss watch's to say (and to re-open), not
    "internal error … in diagnosis" with a Retry on an incident that no longer exists."""
    incident = _alert(rig)
    rig.store.redis.flushall()  # a wiped volume, a failover to an empty replica
    assert wait_until(lambda: f"incident {incident.id} is gone from Redis" in rig.serve.log(),
                      BOUND_S + 30), rig.serve.log()[-3000:]
    assert wait_until(lambda: "Redis lost the bot's data" in rig.serve.log(), 30), \
        rig.serve.log()[-3000:]  # said by the data-loss watch, once
    assert "internal error" not in rig.serve.log(), rig.serve.log()[-3000:]
