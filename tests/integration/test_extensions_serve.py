"""Operator extensions through a real ``incident-bot serve`` (issue 34): the documented
extension's finding is posted, its ``ext.*`` action approved by a signed click runs on a
simulated host, is verified and audited; a hostile host's output proposed as a parameter
is refused and nothing runs; a bad extension file stops ``serve`` at start with the
file, the key and the reason (exit status 2).

Real processes: ``serve`` as a child, a private ``redis-server``, two simulated hosts
behind real sshd; only Slack is a stand-in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.domain.incident import Incident
from bot.domain.lifecycle import IncidentState
from bot.rig.localredis import LocalRedis, start_local_redis
from bot.rig.signed import SignedSender
from bot.rig.slack_standin import SlackStandIn
from bot.sim.sshd import SimHost
from storage.connection import connect
from storage.incidents import IncidentStore
from tests.fixtures.alerts import am_alert, am_payload
from tests.fixtures.remediation import tool_calls
from tests.fixtures.slack_payloads import block_actions, find_button, form
from tests.helpers.extensions import EXAMPLES, FABRIC, FABRIC_DOWN, UNIT, write_dir
from tests.helpers.serve_process import (
    ALERT_TOKEN,
    BOT_TOKEN,
    CHANNEL,
    ROOT,
    SIGNING_SECRET,
    ServeProcess,
    wait_until,
)

S = IncidentState
RESTART = "ext.restart_unit"
HOSTILE = "x.service; rm -rf /"
# the second host names its failed GPU unit through a program of its own, and lies
NAMED = """
probes:
  gpu_unit: {command: "gpu-unit-status --failed", timeout_s: 5}
findings:
  - code: ext.gpu_unit_failed
    probe: gpu_unit
    when: {stdout_matches: "\\\\S"}
    severity: warning
    title: "GPU unit {stdout} failed"
    propose: {action: ext.restart_unit, params: {unit: "{stdout}"}}
"""


@dataclass
class Rig:
    serve: ServeProcess
    standin: SlackStandIn
    store: IncidentStore
    fabric: SimHost
    liar: SimHost

    def incident(self, host: str, states: set[IncidentState], timeout_s: float = 90) -> Incident:
        found: list[Incident] = []

        def reached() -> bool:
            found[:] = [i for i in self.store.list() if i.host == host and i.state in states
                        and i.chat is not None]
            return bool(found)

        assert wait_until(reached, timeout_s), (
            f"{host}: {[(i.state, i.host) for i in self.store.list()]}\n"
            f"{self.serve.log()[-3000:]}")
        return found[0]

    def card(self, incident_id: str) -> dict[str, Any]:
        chat = self.store.require(incident_id).chat
        assert chat is not None
        return dict(self.standin.messages[(chat.channel, chat.ts)])

    def click_approve(self, incident_id: str) -> None:
        assert wait_until(lambda: '"approve' in json.dumps(self.card(incident_id)), 30)
        message = self.card(incident_id)
        block_id, button = find_button(
            message, lambda el: str(el.get("action_id", "")).startswith("approve"))
        payload = block_actions(message, CHANNEL, "UALICE", block_id, button, self.standin.base)
        sender = SignedSender(f"{self.serve.url}/slack/events", SIGNING_SECRET,
                              self.standin.base)
        try:
            assert sender.post(form(payload)).status_code == 200
        finally:
            sender.close()

    def audit(self, incident_id: str, action: str) -> list[dict[str, Any]]:
        return [e.detail for e in self.store.audit.timeline(incident_id) if e.action == action]


def _host(sim: SimHost) -> dict[str, str]:
    return {"ssh": sim.target, "key": str(sim.key_path), "known_hosts": str(sim.known_hosts_path)}


@pytest.fixture
def rig(tmp_path: Path, sim_factory: Callable[..., SimHost]) -> Iterator[Rig]:
    fabric = sim_factory("healthy", overrides=FABRIC_DOWN)
    liar = sim_factory("healthy", overrides={  # its fabric manager runs: only its lie is found
        "units": {UNIT: {"active_state": "active", "unit_file_state": "enabled"}},
        "commands": {"gpu-unit-status --failed": {"stdout": HOSTILE + "\n"}}})
    named = write_dir(tmp_path / "named", {"named.yaml": NAMED})
    server: LocalRedis = start_local_redis(tmp_path / "redis")
    standin = SlackStandIn(token=BOT_TOKEN).start()
    serve = ServeProcess(tmp_path / "bot.yaml", server.url, tmp_path / "serve.log")
    serve.config.write_text(json.dumps({
        "http": {"host": "127.0.0.1", "port": serve.port},
        "hosts": {"gpu-01": _host(fabric), "gpu-02": _host(liar)},
        "slack": {"channel": CHANNEL, "approvers": ["UALICE"], "api_url": standin.api_url},
        "extensions": [str(EXAMPLES), str(named)],
        "extra": {"scheduler": {"enabled": False},
                  "remediation": {"settle_s": 0.3, "verify_timeout_s": 10.0}},
    }))
    client = connect(server.url)
    try:
        yield Rig(serve.start(), standin, IncidentStore(client), fabric, liar)
    finally:
        serve.stop()
        client.close()
        standin.stop()
        server.stop()


def test_an_extension_finding_is_posted_approved_run_verified_and_audited(rig: Rig) -> None:
    alert = am_alert("gpu-01", alertname="FabricManagerDown")
    assert rig.serve.post_alert(am_payload(alert)).status_code == 200
    incident = rig.incident("gpu-01", {S.AWAITING_APPROVAL})
    assert incident.diagnosis is not None
    codes = [f.code for f in incident.diagnosis.findings]
    assert "ext.fabricmanager_down" in codes
    # the alert card is edited into the full card a moment after awaiting_approval is stored
    assert wait_until(lambda: "nvidia-fabricmanager is failed" in json.dumps(
        rig.card(incident.id)), 30), rig.card(incident.id)
    assert f"restart {UNIT}" in json.dumps(rig.card(incident.id))
    assert tool_calls(rig.fabric, "systemctl", "restart") == []  # nothing before the click

    rig.click_approve(incident.id)
    done = rig.incident("gpu-01", {S.VERIFIED, S.ACTION_FAILED})
    assert done.state is S.VERIFIED, (done.results[-1].text if done.results else "",
                                      rig.serve.log()[-3000:])
    assert tool_calls(rig.fabric, "systemctl", "restart") == [["restart", UNIT]]
    assert rig.fabric.state()["units"][UNIT]["active_state"] == "active"
    (started,) = rig.audit(incident.id, "action.started")
    assert started["kind"] == RESTART and started["planned"] == [f"systemctl restart {UNIT}"]
    (succeeded,) = rig.audit(incident.id, "action.succeeded")
    assert succeeded["verification"]["ok"] is True
    assert succeeded["verification"]["evidence"]["stdout"] == "active"
    def said() -> bool:  # the thread says what verify observed
        calls = rig.standin.calls_of("chat.postMessage") + rig.standin.calls_of("chat.update")
        return any("printed 'active'" in json.dumps(c.params) for c in calls)

    assert wait_until(said, 30)


def test_a_hostile_host_output_proposed_as_a_parameter_is_refused_and_nothing_runs(
        rig: Rig) -> None:
    alert = am_alert("gpu-02", alertname="GpuUnitFailed")
    assert rig.serve.post_alert(am_payload(alert)).status_code == 200
    incident = rig.incident("gpu-02", {S.NO_ACTION, S.AWAITING_APPROVAL})
    assert incident.state is S.NO_ACTION and incident.plans == ()
    assert incident.diagnosis is not None
    findings = {f.code: f.title for f in incident.diagnosis.findings}
    assert findings["ext.gpu_unit_failed"] == f"GPU unit {HOSTILE} failed"
    refused = [t for c, t in findings.items() if c == "plan.not_proposed"]
    assert refused and "does not match" in refused[0], findings
    assert wait_until(lambda: "does not match" in json.dumps(rig.card(incident.id)), 30)
    assert '"approve' not in json.dumps(rig.card(incident.id))
    calls = [e for e in rig.liar.command_log() if "tool" in e]
    assert [c for c in calls if c["tool"] == "systemctl" and "restart" in c["argv"]] == []
    # the hostile text never reaches a command (the GPU sampler's own `rm -rf "$d"` is not it)
    assert not any("rm -rf /" in str(e.get("command", "")) or HOSTILE in str(e.get("command", ""))
                   for e in rig.liar.command_log())
    assert not Path(rig.liar.state()["canary"]).exists()


def test_a_bad_extension_file_stops_serve_with_the_file_the_key_and_the_reason(
        tmp_path: Path) -> None:
    bad = write_dir(tmp_path / "ext", {
        "fm.yaml": FABRIC.read_text().replace("code: ext.fabricmanager_down",
                                              "code: fabricmanager_down"),
        "other.yaml": "actions: {ext.x: {run: ['true; reboot'], verify: {command: 'true', "
                      "stdout_matches: '', within_s: 1}, says: x}}\n"})
    config = tmp_path / "bot.yaml"
    config.write_text(json.dumps({"extensions": [str(bad)], "chat_backend": "terminal"}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN,
           "REDIS_URL": "redis://127.0.0.1:1/0"}
    done = subprocess.run([sys.executable, "-m", "bot.cli", "serve", "--config", str(config),
                           "--port", "0"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert f"error: {bad / 'fm.yaml'}: key 'findings.0.code': code 'fabricmanager_down' must " \
           "start with 'ext.' (the built-in ones cannot be replaced)" in lines, lines
    assert any(line.startswith(f"error: {bad / 'other.yaml'}: key 'actions.ext.x.run.0': ")
               for line in lines), lines
