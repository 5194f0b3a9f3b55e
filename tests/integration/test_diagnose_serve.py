"""A person's ``incident-bot diagnose`` answered by a running ``serve`` (issue 37): the
assembled service on real Redis with a simulated host over a real sshd; the CLI as a real
process. Its own token (the alert token does not open it), an inventory host only,
bounded and validated before anything runs; the CLI imports none of the SSH stack when
serve answers, and falls back to its own connection when serve is not there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bot.core.procs import free_port
from bot.sim.sshd import SimHost
from tests.fixtures.bots import Loop, loop, loop_settings  # noqa: F401 - ``loop`` is a fixture

DIAG, ALERT = "diag-token-for-tests", "alert-token-for-tests"


def start(loop: Loop, redis_url: str, sim: SimHost) -> str:  # noqa: F811
    bot = loop.start(loop_settings(redis_url, sim, loop.standin,
                                   extra={"diagnostics": {"samples": 2,
                                                          "sample_interval_s": 0.1}},
                                   incident_bot_diagnose_token=DIAG,
                                   incident_bot_alert_token=ALERT))
    return bot.served.url


def post(url: str, body: Any, token: str | None = DIAG, raw: bytes | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}/diagnose", headers=headers, timeout=120,
                      content=raw if raw is not None else json.dumps(body).encode())


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A real process; prints the modules it loaded on stderr's last line."""
    code = ("import json, sys; from bot.cli import main; rc = main(sys.argv[1:]); "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr);"
            " sys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code, "diagnose", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env})


def test_serve_diagnoses_an_inventory_host_for_its_token_only(
        loop: Loop, redis_url: str, seed_sim: SimHost) -> None:  # noqa: F811
    url = start(loop, redis_url, seed_sim)
    ok = post(url, {"host": "gpu-01", "playbook": "vram_idle"})
    assert ok.status_code == 200, ok.text
    data = ok.json()
    assert data["host"] == "gpu-01" and data["status"] == "ok"
    assert any(f["code"] == "gpu.idle_vram_held" for f in data["findings"])
    assert any(p["name"] == "gpus" and "-lms 100" in p["command"] for p in data["probes"])

    for token in (None, "wrong", ALERT):  # the alert token every agent holds: not this one
        refused = post(url, {"host": "gpu-01"}, token=token)
        assert refused.status_code == 401 and "INCIDENT_BOT_DIAGNOSE_TOKEN" in refused.text
    # an address is taken only as the inventory host it is; any other is refused
    assert post(url, {"host": f"{seed_sim.user}@127.0.0.1:{seed_sim.port}"}).status_code == 200
    other = f"{seed_sim.user}@127.0.0.1:{free_port()}"
    assert post(url, {"host": other}).status_code == 404  # the bot's key: inventory only
    assert post(url, {"host": "gpu-99"}).status_code == 404
    assert post(url, {"host": "gpu-01", "playbook": "rm -rf"}).status_code == 400
    assert post(url, {"host": "gpu-01", "also": 1}).status_code == 400
    assert post(url, None, raw=b"{not json").status_code == 400
    assert post(url, None, raw=b"x" * 5000).status_code == 413


def test_the_cli_asks_serve_and_loads_no_ssh_stack(
        loop: Loop, redis_url: str, seed_sim: SimHost) -> None:  # noqa: F811
    url = start(loop, redis_url, seed_sim)
    env = {"INCIDENT_BOT_URL": url, "INCIDENT_BOT_DIAGNOSE_TOKEN": DIAG}
    proc = cli(env, "gpu-01", "--playbook", "vram_idle", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["host"] == "gpu-01" and data["status"] == "ok"
    loaded = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    assert "did not answer" not in proc.stderr, proc.stderr
    # nothing of the SSH stack, the settings or the playbooks; not even the CLI framework
    assert not {"paramiko", "pydantic", "playbooks", "yaml", "cryptography", "typer"} & loaded
    human = cli(env, "gpu-01", "--playbook", "vram_idle")
    assert human.returncode == 0 and "gpu-01" in human.stdout and "Findings" in human.stdout

    wrong = cli({**env, "INCIDENT_BOT_DIAGNOSE_TOKEN": "wrong"}, "gpu-01", "--json")
    assert wrong.returncode == 2 and "refused the diagnosis (401)" in wrong.stderr


def test_without_serve_the_cli_diagnoses_on_its_own_connection(
        seed_sim: SimHost, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"hosts": {"gpu-01": {
        "ssh": seed_sim.target, "key": str(seed_sim.key_path),
        "known_hosts": str(seed_sim.known_hosts_path)}}}))
    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proc = cli({"INCIDENT_BOT_URL": gone, "INCIDENT_BOT_DIAGNOSE_TOKEN": DIAG}, "gpu-01",
               "--playbook", "vram_idle", "--json", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "ok"
    assert f"serve at {gone} did not answer" in proc.stderr


@pytest.mark.parametrize("spec", ["root@gpu-01:22", "10.0.0.1:22"])
def test_an_address_is_never_sent_to_serve(spec: str) -> None:
    from bot.commands import diagnose_client

    os.environ.setdefault("INCIDENT_BOT_URL", "http://127.0.0.1:1")
    try:
        os.environ["INCIDENT_BOT_DIAGNOSE_TOKEN"] = "x"
        assert diagnose_client.ask(spec, "auto") is None
    finally:
        os.environ.pop("INCIDENT_BOT_DIAGNOSE_TOKEN", None)
        os.environ.pop("INCIDENT_BOT_URL", None)


@pytest.mark.parametrize(("args", "parsed"), [
    (["gpu-01"], ("gpu-01", "auto", False)),
    (["gpu-01", "--json", "-p", "vram_idle"], ("gpu-01", "vram_idle", True)),
    (["--playbook=disk_full", "gpu-01"], ("gpu-01", "disk_full", False)),
    (["gpu-01", "--config", "c.yaml"], None), (["gpu-01", "--help"], None),
    (["gpu-01", "gpu-02"], None), ([], None), (["gpu-01", "--playbook"], None),
])
def test_the_fast_path_takes_exactly_its_own_options(args: list[str], parsed: Any) -> None:
    from bot.commands.diagnose_client import _parse

    assert _parse(args) == parsed
