"""docs/extending.md's examples, run: the YAML in the doc is the example files' text, the
InfiniBand example finds, proposes, runs, verifies and reverts on a simulated host, and
the example chat backend, registered through an entry point, is chosen by ``chat_backend``
and carries a real incident's message."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from redis import Redis
from starlette.testclient import TestClient

from bot.chat import backends
from bot.config.settings import Settings
from bot.core import plugins
from bot.remediation import Outcome, execute
from bot.service import build_service
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from playbooks import run_playbook
from tests.fixtures.alerts import am_alert, am_payload
from tests.fixtures.remediation import FAST, tool_calls
from tests.fixtures.sim import SimFactory
from tests.helpers.extensions import ROOT, installed
from tests.helpers.fault_hosts import FAST as FAST_PLAYBOOK
from tests.helpers.serve_process import wait_until

DOC = ROOT / "docs" / "extending.md"
EXAMPLES = ROOT / "docs" / "examples"
IB = EXAMPLES / "ib_port"
# the site's tool on the host: port mlx5_1 is down until it is enabled
IB_HOST = {"commands": {
    "ib-port-state --down": {"stdout": "mlx5_1\n"},
    "ib-port-state mlx5_1": {"stdout": "Down\n"},
    "ib-port-state --enable mlx5_1": {"then": {"ib-port-state mlx5_1": {"stdout": "Active\n"},
                                               "ib-port-state --down": {"stdout": ""}}},
    "ib-port-state --disable mlx5_1": {"then": {"ib-port-state mlx5_1": {"stdout": "Down\n"}}},
}}


@pytest.mark.parametrize("example", ["extensions/fabric_manager.yaml", "ib_port/ib_port.yaml"])
def test_the_doc_shows_each_example_file_as_it_is(example: str) -> None:
    assert (EXAMPLES / example).read_text() in DOC.read_text()


def test_the_doc_names_the_chat_backend_example() -> None:
    assert "docs/examples/chat_backend/jsonl_chat.py" in DOC.read_text()


def test_the_infiniband_example_finds_proposes_runs_verifies_and_reverts(
        sim_factory: SimFactory, rem_pool: ParamikoPool) -> None:
    host: SimHost = sim_factory("healthy", overrides=IB_HOST)
    with installed([IB]):
        d = run_playbook(rem_pool, host.ssh_target(), "triage", options=FAST_PLAYBOOK)
        (found,) = [f for f in d.findings if f.code == "ext.ib_port_down"]
        assert found.title == "InfiniBand port mlx5_1 is down"
        (proposed,) = [a for a in d.actions if a.kind == "ext.ib_port_up"]
        assert proposed.params == {"port": "mlx5_1"}
        assert proposed.risk.startswith("the port rejoins the fabric")
        done = execute(rem_pool, host.ssh_target(), proposed.kind, proposed.params,
                       approver="UALICE", evidence_hash=None, audit=None, options=FAST)
        assert done.outcome is Outcome.SUCCEEDED, done.summary
        assert done.revertable and done.revert_params == {"port": "mlx5_1"}
        back = execute(rem_pool, host.ssh_target(), "ext.ib_port_up.revert",
                       dict(done.revert_params), approver="UALICE", evidence_hash=None,
                       audit=None, options=FAST)
    assert back.outcome is Outcome.SUCCEEDED, back.summary
    calls = tool_calls(host, "ib-port-state")
    assert calls.index(["--enable", "mlx5_1"]) < calls.index(["--disable", "mlx5_1"])
    assert host.state()["commands"]["ib-port-state mlx5_1"]["stdout"] == "Down\n"


@pytest.fixture
def jsonl_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The example package installed: its entry point beside the built-in backends."""
    monkeypatch.syspath_prepend(str(EXAMPLES / "chat_backend"))
    theirs = EntryPoint("jsonl", "jsonl_chat:JsonlChat", backends.GROUP)
    real = plugins.entry_points
    monkeypatch.setattr(plugins, "entry_points", lambda group: [
        *real(group=group), *([theirs] if group == backends.GROUP else [])])
    backends.backends.cache_clear()
    yield
    backends.backends.cache_clear()
    sys.modules.pop("jsonl_chat", None)


def test_the_example_chat_backend_is_chosen_by_name_and_carries_the_message(
        redis: Redis, redis_url: str, tmp_path: Path, jsonl_registered: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "chat.jsonl"
    monkeypatch.setenv("INCIDENT_BOT_JSONL_CHAT", str(out))
    assert "jsonl" in backends.names()
    settings = Settings.model_validate({
        "redis_url": redis_url, "chat_backend": "jsonl", "incident_bot_alert_token": "t",
        "hosts": {"gpu-01": {"ssh": "root@127.0.0.1:1"}},  # cannot be diagnosed
        "alerts": {"group_wait_s": 0}, "extra": {"scheduler": {"enabled": False}}})
    service = build_service(settings, with_scheduler=False)
    try:
        assert type(service.flow.chat).__name__ == "JsonlBackend" and service.chat_app is None
        service.start_background()
        with TestClient(service.app) as client:
            reply = client.post("/alerts/alertmanager", json=am_payload(am_alert("gpu-01")),
                                headers={"Authorization": "Bearer t"})
            assert reply.status_code == 200, reply.text

        def lines() -> list[dict[str, object]]:
            return [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []

        def edited() -> list[dict[str, object]]:  # the card edited with the outcome
            return [e for e in lines() if e["op"] == "update" and e["incident"] == "INC-1"
                    and "Diagnosis failed" in json.dumps(e)]

        assert wait_until(lambda: bool(edited()), 60), lines()
        first = lines()[0]
        assert first["op"] == "post" and first["incident"] == "INC-1"
        assert edited()[0]["ts"] == first["ts"] and "Retry" in str(edited()[0]["buttons"])
    finally:
        service.close()
