"""Simulated fault hosts through one real ``incident-bot serve``: a private redis-server,
the Slack stand-in, one sim host per scenario (inventory name ``h-<scenario>``, its
expected GPU count from the scenario), each alerted as an on-call's rules would alert it,
and what the on-call reads: the first message's headline, its buttons, the thread.

Alerts are not grouped (``group_wait_s: 0``): each host has its own message. Nothing here
sleeps for a moment; every wait is for a state, with a deadline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.domain.incident import Incident
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.signed import SignedSender
from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost, start_sim
from storage.connection import connect
from storage.incidents import IncidentStore
from tests.fixtures.alerts import am_alert, am_payload
from tests.fixtures.slack_payloads import block_actions, find_button, form
from tests.helpers.fault_hosts import expected_gpus
from tests.helpers.serve_process import (
    BOT_TOKEN,
    CHANNEL,
    SIGNING_SECRET,
    ServeProcess,
    wait_until,
)

APPROVER = "UALICE"
# the alert that fires for each fault (Prometheus rules in deploy/prometheus); the rest
# alert as idle GPU memory, and the hosts whose nvidia-smi cannot answer as a down exporter
ALERTS = {"gpu_ecc_dbe": "GpuEccUncorrectable", "gpu_ecc_vllm": "GpuEccUncorrectable",
          "gpu_xid79": "GpuXidCritical", "gpu_missing": "GpuMissing",
          "gpu_nvml_mismatch": "DcgmExporterDown", "gpu_smi_hang": "DcgmExporterDown",
          "gpu_nvml_denied": "DcgmExporterDown", "healthy": "DcgmExporterDown"}
SETTLED_FIRST = {"awaiting_approval", "no_action", "diagnosis_failed"}


def host_name(scenario: str) -> str:
    return "h-" + scenario.replace("_", "-")


def alert_for(scenario: str) -> str:
    if scenario.startswith("disk_full"):
        return "GpuHostFilesystemFull"
    return ALERTS.get(scenario, "GpuMemoryHeldIdle")


@dataclass
class FaultServe:
    redis: LocalRedis
    standin: SlackStandIn
    serve: ServeProcess
    store: IncidentStore
    sims: dict[str, SimHost]
    posted: dict[str, str] = field(default_factory=dict)  # scenario -> incident id

    def alert(self, scenario: str, **labels: str) -> None:
        response = self.serve.post_alert(am_payload(am_alert(
            host_name(scenario), alert_for(scenario), **labels)))
        assert response.status_code == 200, response.text

    def first(self, scenario: str, timeout_s: float = 90.0) -> Incident:
        """The host's incident once diagnosed and its message shows the diagnosis (the same
        incident, as it is now, once seen)."""
        if scenario in self.posted:
            return self.store.require(self.posted[scenario])
        found: list[Incident] = []

        def ready() -> bool:
            found[:] = [i for i in self.store.list() if i.host == host_name(scenario)
                        and i.state.value in SETTLED_FIRST and i.chat is not None
                        and "diagnosing" not in self.text(i).lower()]
            return bool(found)

        assert wait_until(ready, timeout_s), (scenario, self.serve.log()[-3000:])
        self.posted[scenario] = found[0].id
        return found[0]

    def card(self, incident: Incident) -> dict[str, Any]:
        chat = self.store.require(incident.id).chat
        assert chat is not None
        return dict(self.standin.messages.get((chat.channel, chat.ts), {}))

    def text(self, incident: Incident) -> str:
        """Every visible line of the message, as Slack shows it."""
        return "\n".join(visible(self.card(incident)))

    def headline(self, incident: Incident) -> str:
        """The bold first line without the host: what the on-call reads first."""
        first = visible(self.card(incident))[0].strip("*")
        return first.split(": ", 1)[1] if first.startswith(incident.host + ":") else first

    def buttons(self, incident: Incident) -> list[str]:
        return [el["text"]["text"] for b in self.card(incident).get("blocks") or []
                if b.get("type") == "actions" for el in b.get("elements", [])]

    def thread(self, incident: Incident) -> list[str]:
        chat = self.store.require(incident.id).chat
        assert chat is not None
        return [str(m.get("text", "")) + "\n" + "\n".join(visible(m))
                for (c, _), m in sorted(self.standin.messages.items())
                if c == chat.channel and m.get("thread_ts") == chat.ts]

    def click(self, incident: Incident, action_prefix: str = "approve",
              user: str = APPROVER) -> None:
        """``user`` clicks the first button whose action id starts with the prefix."""
        message = self.card(incident)
        block_id, button = find_button(
            message, lambda el: str(el.get("action_id", "")).startswith(action_prefix))
        payload = block_actions(message, CHANNEL, user, block_id, button, self.standin.base)
        sender = SignedSender(f"{self.serve.url}/slack/events", SIGNING_SECRET,
                              self.standin.base)
        try:
            assert sender.post(form(payload)).status_code == 200
        finally:
            sender.close()


def visible(message: Mapping[str, Any]) -> list[str]:
    """What Slack shows of a message: every text line of every block."""
    lines: list[str] = []
    for block in message.get("blocks") or []:
        if block.get("type") == "actions":
            lines.append(" ".join(e["text"]["text"] for e in block.get("elements", [])))
        elif block.get("type") == "context":
            lines += [str(e.get("text", "")) for e in block.get("elements", [])]
        elif isinstance(block.get("text"), Mapping):
            lines += str(block["text"].get("text", "")).splitlines()
        for f in block.get("fields") or []:
            lines += str(f.get("text", "")).splitlines()
    return lines or str(message.get("text", "")).splitlines()


@contextmanager
def fault_serve(workdir: Path, scenarios: list[str], *,
                host_fields: Mapping[str, Mapping[str, Any]] | None = None,
                overrides: Mapping[str, dict[str, Any]] | None = None,
                extra: Mapping[str, Any] | None = None) -> Iterator[FaultServe]:
    """One serve with every scenario as a host; stopped by PID at the end."""
    server = start_local_redis(workdir / "redis")
    standin = SlackStandIn(token=BOT_TOKEN).start()
    sims: dict[str, SimHost] = {}
    serve = ServeProcess(workdir / "bot.yaml", server.url, workdir / "serve.log")
    client = None
    try:
        for name in scenarios:
            sims[name] = start_sim(name, workdir=workdir / f"sim-{name}",
                                   overrides=dict((overrides or {}).get(name) or {}) or None)
        hosts = {host_name(n): _host(n, s, (host_fields or {}).get(n)) for n, s in sims.items()}
        serve.config.write_text(json.dumps({
            "http": {"host": "127.0.0.1", "port": serve.port}, "hosts": hosts,
            "alerts": {"group_wait_s": 0},
            "slack": {"channel": CHANNEL, "approvers": [APPROVER], "api_url": standin.api_url},
            "extra": {"scheduler": {"enabled": False},
                      "diagnostics": {"samples": 2, "sample_interval_s": 0.1,
                                      "command_timeout_s": 3.0},
                      "remediation": {"verify_timeout_s": 8, "settle_s": 0.3,
                                      "poll_interval_s": 0.1},
                      **(extra or {})}}))
        client = connect(server.url)
        yield FaultServe(server, standin, serve.start(), IncidentStore(client), sims)
    finally:
        serve.stop()
        if client is not None:
            client.close()
        for sim in sims.values():
            sim.stop()
        standin.stop()
        server.stop()


def _host(scenario: str, sim: SimHost, fields: Mapping[str, Any] | None) -> dict[str, Any]:
    gpus = expected_gpus(scenario)
    return {"ssh": sim.target, "key": str(sim.key_path), "known_hosts": str(sim.known_hosts_path),
            **({"gpus": gpus} if gpus else {}), **dict(fields or {})}
