"""The host agent for real (boot id, disk, outbox, HTTP to a live bot); NVML via the fake."""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from redis import Redis

from bot.agent.client import Reply, post_alerts
from bot.agent.config import AgentConfig, AgentConfigError, parse_args
from bot.agent.runner import EX_TEMPFAIL, Agent
from bot.core.procs import free_port
from bot.domain.lifecycle import IncidentState
from storage.incidents import IncidentStore
from tests.fixtures.alerts import ALERT_TOKEN, LiveServer
from tests.fixtures.fake_pynvml import FakeGpu, write_shim
from tests.fixtures.need import need

ROOT = Path(__file__).resolve().parents[2]
H100_MIB = 81559


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def run_agent(
    state: Path,
    url: str,
    *extra: str,
    env: dict[str, str] | None = None,
    python_path: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m bot.agent --once`` in a subprocess, as the systemd unit runs it."""
    paths = [str(python_path)] if python_path else []
    full_env = {
        **os.environ,
        "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN,
        "PYTHONPATH": os.pathsep.join([*paths, str(ROOT)]),
        **(env or {}),
    }
    args = [
        sys.executable,
        "-m",
        "bot.agent",
        "--url",
        url,
        "--once",
        "--host",
        "gpu-01",
        "--state-dir",
        str(state / "agent"),
        "--boot-id-path",
        str(state / "boot_id"),
        "--mount",
        str(state),
        *extra,
    ]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=full_env)


@pytest.fixture
def bot(alert_server: Callable[..., LiveServer]) -> LiveServer:
    return alert_server()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    (tmp_path / "boot_id").write_text("aaaaaaaa-0000-0000-0000-000000000001\n")
    return tmp_path


def test_reboot_is_reported_once_per_new_boot_id(
    bot: LiveServer, state: Path, redis: Redis
) -> None:
    assert run_agent(state, bot.url).returncode == 0  # first run: remembers the boot id
    assert IncidentStore(redis).list() == []
    (state / "boot_id").write_text("bbbbbbbb-0000-0000-0000-000000000002\n")
    assert run_agent(state, bot.url).returncode == 0
    assert run_agent(state, bot.url).returncode == 0  # same boot: nothing new
    (incident,) = IncidentStore(redis).list()
    assert (incident.host, incident.kind, incident.source) == ("gpu-01", "vm_restart", "agent")
    assert incident.details == {
        "previous_boot_id": "aaaaaaaa-0000-0000-0000-000000000001",
        "boot_id": "bbbbbbbb-0000-0000-0000-000000000002",
    }


def test_buffered_on_disk_while_the_bot_is_down(bot: LiveServer, state: Path, redis: Redis) -> None:
    run_agent(state, dead_url())
    (state / "boot_id").write_text("cccccccc-0000-0000-0000-000000000003\n")
    down = run_agent(state, dead_url(), "--disk-used-pct", "0")
    assert down.returncode == EX_TEMPFAIL and "kept on disk" in down.stderr
    outbox = state / "agent" / "outbox"
    kinds = sorted(json.loads(p.read_text())["kind"] for p in outbox.glob("*.json"))
    assert kinds == ["disk_full", "vm_restart"]
    assert IncidentStore(redis).list() == []
    saved = {p.name: p.read_bytes() for p in outbox.glob("*.json")}
    up = run_agent(state, bot.url, "--disk-used-pct", "0")
    assert up.returncode == 0 and list(outbox.glob("*.json")) == []
    for name, data in saved.items():  # the acks were lost: the agent sends everything again
        (outbox / name).write_bytes(data)
    assert run_agent(state, bot.url, "--disk-used-pct", "0").returncode == 0
    incidents = IncidentStore(redis).list()
    assert sorted(i.kind for i in incidents) == ["disk_full", "vm_restart"]
    assert all(i.count == 1 for i in incidents)  # redelivery applied once


def test_disk_threshold_fires_and_clears(bot: LiveServer, state: Path, redis: Redis) -> None:
    assert run_agent(state, bot.url, "--disk-used-pct", "0").returncode == 0
    (incident,) = IncidentStore(redis).list()
    assert incident.kind == "disk_full" and incident.details["mount"] == str(state)
    assert incident.labels["subject"] == f"space:{state}"
    assert run_agent(state, bot.url, "--disk-used-pct", "0").returncode == 0  # still full
    assert IncidentStore(redis).require(incident.id).count == 1
    assert run_agent(state, bot.url, "--disk-used-pct", "100").returncode == 0
    assert IncidentStore(redis).require(incident.id).state is IncidentState.RESOLVED


def test_inode_threshold(bot: LiveServer, state: Path, redis: Redis) -> None:
    run_agent(state, bot.url, "--inodes-used-pct", "0")
    (incident,) = IncidentStore(redis).list()
    assert incident.labels["subject"] == f"inodes:{state}"


def config(state: Path, url: str, **kw: Any) -> AgentConfig:
    base: dict[str, Any] = {
        "url": url,
        "token": ALERT_TOKEN,
        "host": "gpu-01",
        "state_dir": state / "agent",
        "boot_id_path": state / "boot_id",
        "mounts": (str(state),),
        "idle_for_s": 600.0,
    }
    return AgentConfig(**{**base, **kw})


def story_gpus(util: int = 0) -> list[FakeGpu]:
    """The seed story: 8 × 75.8 GB held at 0% by vLLM (pid 4242)."""
    return [
        FakeGpu(
            used_mib=77619,
            util=util,
            samples=[(1_000_000 * n, util) for n in range(1, 6)],
            processes=[(4242, 77000)],
        )
        for _ in range(8)
    ]


def test_vram_held_idle_fires_after_the_window_and_clears(
    fake_nvml: ModuleType, bot: LiveServer, state: Path, redis: Redis
) -> None:
    fake_nvml.reset(story_gpus())
    now = [1000.0]
    agent = Agent(config(state, bot.url), nvml=fake_nvml, clock=lambda: now[0])
    assert agent.run_once() == 0 and IncidentStore(redis).list() == []  # not idle long enough
    now[0] += 601
    for gpu in fake_nvml.STATE.gpus:  # new samples since the last tick, still 0%
        gpu.samples = [(10_000_000, 0), (11_000_000, 0)]
    assert agent.run_once() == 0
    (incident,) = IncidentStore(redis).list()
    assert incident.kind == "vram_idle" and incident.severity.value == "critical"
    gpus = incident.details["gpus"]
    assert len(gpus) == 8 and gpus[0]["used_mib"] == 77619 and gpus[0]["util_pct"] == 0
    assert gpus[0]["processes"] == [{"pid": 4242, "used_mib": 77000}]
    assert "8 GPU(s) hold 606.4 GiB" in incident.summary
    for gpu in fake_nvml.STATE.gpus:  # the work resumes: utilisation in the new samples
        gpu.samples = [(20_000_000, 0), (21_000_000, 87)]
    now[0] += 30
    assert agent.run_once() == 0
    assert IncidentStore(redis).require(incident.id).state is IncidentState.RESOLVED


def test_unsupported_nvml_queries_fall_back(fake_nvml: ModuleType, state: Path) -> None:
    fake_nvml.reset(
        [
            FakeGpu(used_mib=70000, util=0, samples=None, processes=None),
            FakeGpu(used_mib=70000, util=55, samples=None, processes=None),
            FakeGpu(used_mib=100, lost=True),
        ]
    )
    sent: list[list[dict[str, Any]]] = []

    def send(url: str, token: str, alerts: list[dict[str, Any]], timeout: float) -> Reply:
        sent.append(alerts)
        return Reply(200, "{}")

    agent = Agent(config(state, "http://bot.invalid", idle_for_s=0), nvml=fake_nvml, send=send)
    samples = agent.sampler.sample()
    assert [(s.index, s.util_pct, s.processes) for s in samples] == [(0, 0, None), (1, 55, None)]
    assert agent.run_once() == 0
    (alert,) = [a for batch in sent for a in batch if a["kind"] == "vram_idle"]
    assert [g["index"] for g in alert["details"]["gpus"]] == [0]
    assert fake_nvml.STATE.initialized is False  # nvmlShutdown on exit


def test_real_pynvml_without_a_gpu_skips_with_a_log_line(
    state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    need(importlib.util.find_spec("pynvml") is not None, "nvidia-ml-py is not installed")
    import pynvml

    sent: list[dict[str, Any]] = []
    agent = Agent(
        config(state, "http://bot.invalid", disk_used_pct=0),
        nvml=pynvml,
        send=lambda u, t, alerts, s: (sent.extend(alerts), Reply(200, ""))[1],
    )
    with caplog.at_level(logging.WARNING, logger="bot.agent.gpu"):
        try:
            pynvml.nvmlInit()
            pynvml.nvmlShutdown()
            pytest.skip("this machine has a working NVML")
        except pynvml.NVMLError:
            pass
        assert agent.run_once() == 0
    assert "GPU check skipped: NVML unavailable" in caplog.text
    assert [a["kind"] for a in sent] == ["disk_full"]  # the other checks still ran


def test_bad_alerts_are_set_aside_not_retried_forever(state: Path) -> None:
    replies = iter([Reply(400, "batch"), Reply(400, '{"error": "bad"}'), Reply(200, "{}")])
    agent = Agent(config(state, "http://bot.invalid"), send=lambda *a: next(replies))
    agent.outbox.put({"host": "gpu-01", "kind": "disk_full", "id": "1"})
    agent.outbox.put({"host": "gpu-01", "kind": "disk_full", "id": "2"})
    assert agent.flush()
    rejected = sorted(p.name for p in (state / "agent" / "rejected").iterdir())
    assert len(rejected) == 2 and rejected[1].endswith(".reason")
    assert '"id": "1"' in (state / "agent" / "rejected" / rejected[0]).read_text()


def test_wrong_token_keeps_alerts(bot: LiveServer, state: Path) -> None:
    agent = Agent(config(state, bot.url, token="wrong"))
    agent.outbox.put({"host": "gpu-01", "kind": "disk_full", "id": "1"})
    assert not agent.flush() and len(agent.outbox) == 1 and agent.backoff_s == 1.0
    assert post_alerts(f"{bot.url}/alerts", "wrong", [], 5).status == 401


def test_config_errors(tmp_path: Path) -> None:
    with pytest.raises(AgentConfigError, match="INCIDENT_BOT_ALERT_TOKEN"):
        parse_args(["--url", "http://x"], environ={})
    with pytest.raises(AgentConfigError, match="http"):
        parse_args(["--url", "ftp://x"], environ={"INCIDENT_BOT_ALERT_TOKEN": "t"})
    ok = parse_args(
        ["--url", "http://x/", "--mount", "/", "--mount", "/data"],
        environ={"INCIDENT_BOT_ALERT_TOKEN": "t"},
    )
    assert ok.alerts_url == "http://x/alerts" and ok.mounts == ("/", "/data")


def _imports(args: list[str], state: Path, shim: Path | None = None) -> str:
    env = {
        **os.environ,
        "INCIDENT_BOT_ALERT_TOKEN": ALERT_TOKEN,
        "PYTHONPATH": os.pathsep.join([*([str(shim)] if shim else []), str(ROOT)]),
    }
    code = (
        "import sys, runpy\n"
        f"sys.argv = {args!r}\n"
        "try:\n"
        "    runpy.run_module(sys.argv[0], run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'pydantic', 'redis', 'starlette', 'paramiko', 'slack_bolt', 'rq',"
        " 'pynvml')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=state,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_agent_never_imports_torch(state: Path, bot: LiveServer) -> None:
    shim = write_shim(state / "shim", {"gpus": [{"used_mib": 100, "util": 3}]})
    common = [
        "--url",
        bot.url,
        "--once",
        "--state-dir",
        str(state / "a"),
        "--boot-id-path",
        str(state / "boot_id"),
        "--mount",
        str(state),
    ]
    lean = _imports(["bot.agent", *common], state, shim)
    # the fake NVML and pydantic (typer >= 0.20 checks option values with it: the agent's
    # options are the same typer command as `incident-bot agent`), nothing heavy at all
    assert {m.split(".")[0] for m in ast.literal_eval(lean)} == {"pynvml", "pydantic"}, lean
    via_cli = _imports(["bot.cli", "agent", *common], state, shim)
    assert "torch" not in via_cli, via_cli


def test_shipped_systemd_unit_runs_the_lean_entry_point() -> None:
    unit = (ROOT / "deploy/systemd/incident-bot-agent.service").read_text()
    assert "-m bot.agent" in unit and "EnvironmentFile=" in unit
    assert "Restart=always" in unit and "MemoryMax=" in unit
