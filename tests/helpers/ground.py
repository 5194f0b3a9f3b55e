"""Real processes for the issue-39 fault tests: ``serve`` replicas (children), a private
``redis-server`` that can be made to refuse (``tests/helpers/redis_faults.py``), the seed
host behind a real sshd, the Slack stand-in; and the reads the tests make of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from redis.exceptions import RedisError

from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.signed import SignedSender
from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost
from storage.connection import connect
from storage.incidents import IncidentStore
from tests.fixtures.alerts import am_alert, am_payload
from tests.fixtures.slack_payloads import block_actions, find_button, form
from tests.helpers.redis_faults import FAULT_ARGS, RedisFaults
from tests.helpers.serve_process import (
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    ServeProcess,
    bot_config,
    wait_until,
)

SETTLED = frozenset({IncidentState.AWAITING_APPROVAL, IncidentState.NO_ACTION,
                     IncidentState.DIAGNOSIS_FAILED, IncidentState.VERIFIED,
                     IncidentState.ACTION_FAILED, IncidentState.RESOLVED})


@dataclass
class Ground:
    tmp: Path
    redis: LocalRedis
    faults: RedisFaults
    standin: SlackStandIn
    sim: SimHost
    store: IncidentStore
    reconcile: dict[str, float]
    serves: list[ServeProcess] = field(default_factory=list)

    @classmethod
    def start(cls, tmp: Path, sim: SimHost, reconcile: dict[str, float],
              replicas: int = 1, extra: dict[str, Any] | None = None,
              ssh: dict[str, float] | None = None) -> Ground:
        server = start_local_redis(tmp / "redis", args=FAULT_ARGS)
        standin = SlackStandIn(token=BOT_TOKEN).start()
        ground = cls(tmp, server, RedisFaults(server), standin, sim,
                     IncidentStore(connect(server.url)), reconcile)
        for n in range(replicas):
            serve = ServeProcess(tmp / f"bot{n}.yaml", server.url, tmp / f"serve{n}.log")
            bot_config(serve.config, sim, standin, serve.port, reconcile, extra)
            if ssh:
                config = json.loads(serve.config.read_text())
                serve.config.write_text(json.dumps({**config, "ssh_defaults": ssh}))
            ground.serves.append(serve.start())
        return ground

    def stop(self) -> None:
        for serve in self.serves:
            serve.stop()
        self.faults.close()
        self.store.redis.close()
        self.standin.stop()
        self.redis.stop()

    @property
    def serve(self) -> ServeProcess:
        return self.serves[0]

    def logs(self) -> str:
        return "\n".join(s.log()[-3000:] for s in self.serves)

    # --- reads that survive Redis going away -----------------------------------------------
    def incidents(self) -> list[Incident]:
        try:
            return self.store.list()
        except RedisError:
            return []

    def get(self, incident_id: str) -> Incident | None:
        try:
            return self.store.get(incident_id)
        except RedisError:
            return None

    def settled(self, incident_id: str) -> bool:
        incident = self.get(incident_id)
        return (incident is not None and incident.state in SETTLED and incident.chat is not None
                and incident.running is None)

    def wait_incident(self, check: Callable[[Incident], bool], timeout_s: float = 60,
                      what: str = "an incident") -> Incident:
        found: list[Incident] = []

        def seen() -> bool:
            found[:] = [i for i in self.incidents() if check(i)]
            return bool(found)

        assert wait_until(seen, timeout_s), f"no incident: {what}\n{self.logs()}"
        return found[0]

    def alert(self, alertname: str = "GpuMemoryHeldIdle", serve: int = 0,
              **labels: str) -> httpx.Response:
        return self.serves[serve].post_alert(am_payload(am_alert("gpu-01", alertname,
                                                                  **labels)), timeout_s=30)

    # --- Slack, as the stand-in saw it ------------------------------------------------------
    def parents(self) -> list[dict[str, Any]]:
        return self.standin.top_level(CHANNEL)

    def card(self, incident_id: str) -> dict[str, Any]:
        incident = self.get(incident_id)
        assert incident is not None and incident.chat is not None, incident_id
        return dict(self.standin.messages[(incident.chat.channel, incident.chat.ts)])

    def card_shows(self, incident_id: str, needle: str) -> bool:
        incident = self.get(incident_id)
        if incident is None or incident.chat is None:
            return False
        message = self.standin.messages.get((incident.chat.channel, incident.chat.ts)) or {}
        return needle in json.dumps(message)

    def click(self, message: dict[str, Any], prefix: str, user: str = "UALICE",
              serve: int = 0) -> httpx.Response:
        """``user`` clicks the first button whose action id starts with ``prefix``."""
        block_id, button = find_button(
            message, lambda el: str(el.get("action_id", "")).startswith(prefix))
        payload = block_actions(message, CHANNEL, user, block_id, button, self.standin.base)
        sender = SignedSender(f"{self.serves[serve].url}/slack/events", SIGNING_SECRET,
                              self.standin.base)
        try:
            return sender.post(form(payload))
        finally:
            sender.close()

    def ephemerals(self, user: str = "UALICE") -> list[str]:
        return [str(c.params.get("text", "")) for c in self.standin.calls_of("chat.postEphemeral")
                if c.params.get("user") == user]

    def readyz(self, serve: int = 0) -> httpx.Response:
        return httpx.get(f"{self.serves[serve].url}/readyz", timeout=15)
