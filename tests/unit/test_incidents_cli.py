"""`incident-bot incidents`, `audit` and `silence` against a real Redis (via REDIS_URL)."""

from __future__ import annotations

import json

import pytest
from redis import Redis

from bot.cli import main
from bot.domain.incident import Alert
from bot.domain.lifecycle import IncidentState
from storage.audit import hash_evidence
from storage.incidents import IncidentStore


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)


@pytest.fixture
def seeded(redis: Redis) -> IncidentStore:
    store = IncidentStore(redis)
    store.ingest([Alert("alertmanager", h, "vram_idle", summary=f"idle on {h}") for h in
                  ("gpu-01", "gpu-02")])
    store.open_or_fold(Alert("agent", "gpu-03", "disk_full", summary="/data 99% full"))
    store.transition("INC-1", IncidentState.DIAGNOSING, "bot", "playbook vram_idle",
                     evidence_hash=hash_evidence({"x": 1}))
    return store


def test_incidents_table(env: None, seeded: IncidentStore,
                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["incidents"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["ID", "STATE", "KIND", "HOST"]
    assert out[1].split()[:4] == ["INC-1", "diagnosing", "vram_idle", "gpu-01"]
    assert "+1" in out[1]  # a group parent shows how many more hosts
    assert out[2].startswith("  INC-2")  # its child, indented
    assert "/data 99% full" in out[3]


def test_incidents_json_and_all(env: None, seeded: IncidentStore,
                                capsys: pytest.CaptureFixture[str]) -> None:
    seeded.transition("INC-3", IncidentState.RESOLVED, "U1", "cleaned up")
    assert main(["incidents", "--json"]) == 0
    assert [i["id"] for i in json.loads(capsys.readouterr().out)] == ["INC-1", "INC-2"]
    assert main(["incidents", "--json", "--all"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(i["id"], i["state"]) for i in rows][-1] == ("INC-3", "resolved")


def test_no_incidents(env: None, redis: Redis, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["incidents"]) == 0
    assert capsys.readouterr().out.strip() == "No incidents."


def test_audit_timeline(env: None, seeded: IncidentStore,
                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "inc-1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in lines] == ["opened", "grouped", "transition"]
    assert '"to":"diagnosing"' in lines[2] and "evidence=sha256:" in lines[2]
    assert main(["audit", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[2]["actor"] == "bot"


@pytest.mark.parametrize(("args", "code", "message"), [
    (["audit", "INC-99"], 1, "no incident 'INC-99'"),
    (["audit", "rm -rf /"], 2, "invalid incident id"),
    (["silence", "add", "*", "*"], 2, "not both '*'"),
    (["silence", "add", "gpu-01", "disk_full", "--for", "soon"], 2, "invalid duration"),
    (["silence", "remove", "gpu-01", "disk_full"], 1, "no silence on gpu-01/disk_full"),
])
def test_errors_are_one_line(env: None, redis: Redis, capsys: pytest.CaptureFixture[str],
                             args: list[str], code: int, message: str) -> None:
    assert main(args) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and err.startswith("error: ")


def test_silence_add_list_remove(env: None, redis: Redis,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["silence", "add", "gpu-01", "vram_idle", "--for", "2h", "--by", "alice",
                 "--reason", "benchmark"]) == 0
    assert "silenced gpu-01/vram_idle until" in capsys.readouterr().out
    assert main(["silence", "list", "--json"]) == 0
    (silence,) = json.loads(capsys.readouterr().out)
    assert (silence["author"], silence["reason"]) == ("alice", "benchmark")
    store = IncidentStore(redis)
    assert store.ingest([Alert("webhook", "gpu-01", "vram_idle")]).counts() == {"silenced": 1}
    assert main(["silence", "remove", "gpu-01", "vram_idle"]) == 0
    assert main(["silence", "list"]) == 0
    assert capsys.readouterr().out.strip().endswith("No active silences.")


def test_redis_down_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from bot.core.procs import free_port

    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")
    assert main(["incidents"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach Redis at redis://127.0.0.1:")
    assert err.count("\n") == 1


def test_silence_list_shows_maintenance_windows(env: None, redis: Redis,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from bot.domain.maintenance import MaintenanceWindow
    from bot.domain.windows import parse_window
    from storage.silences import SilenceStore

    SilenceStore(redis).set_maintenance(
        [MaintenanceWindow("gpu-0*", (), parse_window("Sat 02:00-04:00 UTC"), "firmware")],
        "config")
    assert main(["silence", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["No active silences.", "gpu-0*/*  every Sat 02:00-04:00 UTC  "
                        "(maintenance window)  firmware"]
