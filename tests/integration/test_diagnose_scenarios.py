"""Playbooks end to end over real SSH against the simulated hosts' scenarios."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import paramiko
import pytest

from bot.domain.findings import Diagnosis, DiagnosisStatus
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from bot.ssh.settings import SSHSettings
from playbooks import PlaybookOptions, probe_gpus, run_playbook

UNIT = "vllm-kimi-k25-int4.service"
# The seed's unit file is in /etc/systemd/system, where `systemctl mask` refuses ("File …
# already exists"): only stop_disable is proposed.
SEED_ACTIONS = [("systemd.stop_disable", {"unit": UNIT})]
DISABLED = {
    "vllm-kimi-k25-int4-ngram.service",
    "vllm-kimi-k25.service",
    "vllm-glm5.service",
    "sglang-kimi.service",
}




def diagnose(pool: ParamikoPool, host: SimHost, name: str, **kw: object) -> Diagnosis:
    return run_playbook(pool, host.ssh_target(), name, **kw)  # type: ignore[arg-type]


def actions(d: Diagnosis) -> list[tuple[str, dict[str, str]]]:
    return [(a.kind, a.params) for a in d.actions]


@pytest.mark.parametrize("scenario", ["seed", "seed_container"])
def test_seed_names_the_unit_and_proposes_exactly_its_stop_disable(
    pool: ParamikoPool, sims: Callable[[str], SimHost], scenario: str
) -> None:
    d = diagnose(pool, sims(scenario), "vram_idle")
    assert d.status is DiagnosisStatus.OK, [p for p in d.probes if not p.ok]
    assert actions(d) == SEED_ACTIONS
    idle = next(f for f in d.findings if f.code == "gpu.idle_vram_held")
    assert "started at boot (+" in idle.title
    assert f"by {UNIT} (enabled, Restart=always)" in idle.title
    assert idle.title.startswith("8 GPUs hold 75.8 GiB each at 0% since boot (")
    assert "PID 440 (vLLM, --gpu-memory-utilization 0.95, user root)" in idle.title
    first = idle.evidence["holders"][0]  # ps's run time, and the unit's as a cross-check
    assert first["elapsed_s"] is not None and first["unit_active_after_boot_s"] is not None
    assert first["unit_active_after_boot_s"] <= 300 and first["started_after_boot_s"] <= 300
    found_by = {h["found_by"] for h in idle.evidence["holders"]}
    assert found_by == ({"nvidia-smi"} if scenario == "seed" else {"/dev/nvidia*"})
    quiet = next(f for f in d.findings if f.code == "gpu.units_disabled")
    assert set(quiet.evidence["units"]) == DISABLED
    assert not any(a.params.get("unit") in DISABLED for a in d.actions)
    assert d.duration_s > 0  # measured (how fast is bench/diagnose.py's question)


def test_json_contract_shape(pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    doc = diagnose(pool, sims("seed"), "vram_idle").to_dict()
    json.dumps(doc)
    assert set(doc) == {"host", "playbook", "status", "duration_s", "findings", "actions", "probes"}
    assert doc["host"] == "gpu-01" and doc["playbook"] == "vram_idle" and doc["status"] == "ok"
    assert set(doc["actions"][0]) == {"id", "kind", "params", "reason", "risk"}
    assert set(doc["probes"][0]) == {"name", "command", "exit_status", "duration_s", "timed_out"}
    assert {p["name"] for p in doc["probes"]} >= {"gpus", "gpu_processes", "processes"}


def test_vm_restart_story(pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    jobs = [{"job_id": "kimi-k25-hidden", "done": 18283, "total": 37312}]
    d = diagnose(
        pool,
        sims("seed"),
        "vm_restart",
        context={"interrupted_jobs": jobs},
        options=PlaybookOptions(expected_mounts=("/data", "/scratch")),
    )
    by_code = {f.code: f for f in d.findings}
    assert by_code["boot.previous"].evidence["clean"] is False
    assert "without a clean shutdown" in by_code["boot.previous"].title
    assert by_code["boot.gpu_autostart"].evidence["unit"] == UNIT
    assert by_code["mount.missing"].evidence["mount"] == "/scratch"
    assert "kimi-k25-hidden" in by_code["extract.interrupted"].title
    assert actions(d) == SEED_ACTIONS


def test_respawn_watchdog_stopped_first(pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = diagnose(pool, sims("respawn"), "vram_idle")
    assert [a.params["unit"] for a in d.actions] == ["gpu-watchdog.service", UNIT]
    assert any(f.code == "systemd.watchdog" for f in d.findings)


def test_disk_full_scenario(pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = diagnose(pool, sims("disk_full"), "auto")
    assert d.playbook == "disk_full"
    full = {f.evidence["filesystem"]["mount"] for f in d.findings if f.code == "disk.full"}
    assert full == {"/", "/data"}
    codes = {f.code for f in d.findings}
    assert {"disk.largest_dirs", "disk.deleted_open", "disk.shm", "disk.journal"} <= codes
    largest = next(f for f in d.findings if f.code == "disk.largest_dirs" and "/data" in f.title)
    assert largest.evidence["entries"][0]["path"] == "/data/hidden_states"
    # the disk's own only: the wedged GPUs' step (PID 1312 in D state, writing to the full
    # /data: a reboot) waits for it, said as a person's step with no button (issue 35): a
    # reboot beside the vacuum would kill the extraction and free no byte
    assert actions(d) == [("disk.journal_vacuum", {"size": "500M"})]
    said = next(f.title for f in d.findings if f.code == "gpu.step")
    assert said.startswith("For a person") and "once the problem above is dealt with" in said


def test_healthy_host(pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    auto = diagnose(pool, sims("healthy"), "auto")
    assert auto.playbook == "triage" and auto.actions == ()
    busy = diagnose(pool, sims("healthy"), "vram_idle")
    assert busy.actions == () and "gpu.busy_holder" in [f.code for f in busy.findings]


def test_hostile_names_never_reach_a_command_line(
    pool: ParamikoPool, sims: Callable[[str], SimHost]
) -> None:
    host = sims("hostile")
    for name in ("vram_idle", "vm_restart", "disk_full", "triage", "gpu_health", "auto"):
        d = diagnose(pool, host, name)
        assert d.status is not DiagnosisStatus.UNREACHABLE
        for action in d.actions:
            assert not any(c in v for v in action.params.values() for c in "$` ")
        assert not any(a.kind.startswith("systemd") for a in d.actions)
        assert not any(a.kind == "process.terminate" for a in d.actions)  # systemd restarts it
    findings = diagnose(pool, host, "vram_idle").findings
    refused = [f for f in findings if f.code == "validate.refused"]
    assert refused and "gpu-hog-$(touch" in refused[0].evidence["value"]
    log = host.command_log()
    sent = [e["command"] for e in log if e.get("command")] + [
        " ".join(e["argv"]) for e in log if e.get("tool")
    ]
    assert len(sent) > 20
    assert not [s for s in sent if "touch" in s or "CANARY" in s or "gpu-hog" in s]
    assert not (host.workdir / "CANARY").exists()


def test_probe_gpus_helper(pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    gpus = probe_gpus(pool, sims("seed").ssh_target())
    assert len(gpus) == 8 and all(g.memory_used_mib == 77600 for g in gpus)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_closed_port_and_blackhole(sims: Callable[[str], SimHost]) -> None:
    target = sims("seed").ssh_target()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(8)
    try:
        with ParamikoPool(SSHSettings(connect_timeout_s=1.0)) as pool:
            for port in (_free_port(), hole.getsockname()[1]):
                start = time.monotonic()
                d = run_playbook(pool, replace(target, port=port), "vm_restart")
                took = time.monotonic() - start
                assert d.status is DiagnosisStatus.UNREACHABLE
                assert [f.code for f in d.findings] == ["ssh.unreachable"]
                assert "gpu-01 is unreachable" in d.findings[0].title
                assert took < 1.0 + 1.5, f"port {port}: {took:.1f}s"
    finally:
        hole.close()


def test_changed_host_key_is_a_finding(sims: Callable[[str], SimHost], tmp_path: Path) -> None:
    host = sims("seed")
    other = paramiko.Ed25519Key.from_private_key_file(str(host.key_path))
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{host.port} {other.get_name()} {other.get_base64()}\n")
    with ParamikoPool() as pool:
        d = run_playbook(pool, replace(host.ssh_target(), known_hosts=str(known)), "vram_idle")
    assert d.status is DiagnosisStatus.UNREACHABLE
    assert [(f.code, f.title) for f in d.findings] == [
        ("ssh.host_key_mismatch", "host key mismatch for gpu-01")
    ]
    assert d.probes == ()


def test_probe_past_its_deadline_makes_the_diagnosis_partial(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = diagnose(pool, sims("disk_full"), "disk_full",
                 options=PlaybookOptions(du_timeout_s=0.01))
    assert d.status is DiagnosisStatus.PARTIAL
    assert any(p.name == "du" and p.timed_out for p in d.probes)
    assert any(f.code == "disk.du_timed_out" for f in d.findings)
    assert ("disk.journal_vacuum", {"size": "500M"}) in actions(d)  # the rest still decided
