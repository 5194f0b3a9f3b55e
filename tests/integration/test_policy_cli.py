"""`incident-bot policy check|replay` through the CLI, replay against a real redis-server."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from redis import Redis

from bot.cli import main
from bot.domain.incident import Alert
from storage.audit import AuditLog
from storage.incidents import IncidentStore

POLICIES = """
policies:
  - name: stop-autostarted-inference
    match: {action: systemd.stop_disable, unit: "vllm-*", hosts: "gpu-*", kinds: [vm_restart]}
    mode: auto
    limit: {max_hosts: 3, per: 1h}
  - name: shadow-masks
    match: {action: systemd.mask}
    mode: shadow
  - name: reboots
    match: {action: host.reboot}
    two_person: true
policy_limits: {max_hosts_per_hour: 10, max_fraction: 1.0}
"""


def config(tmp_path: Path, redis_url: str, hosts: int = 4) -> Path:
    inventory = "".join(f"  gpu-0{i}: {{ssh: root@127.0.0.1:22}}\n" for i in range(1, hosts + 1))
    path = tmp_path / "config.yaml"
    path.write_text(f"redis_url: {redis_url}\nhosts:\n{inventory}{POLICIES}")
    return path


def at(t: float) -> Callable[[], float]:
    return lambda: t


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_check_prints_the_policy_and_mode_per_host_and_action(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    rc, out, _ = run(capsys, "policy", "check", "--config", str(config(tmp_path, "redis://x")))
    assert rc == 0
    rows = out.splitlines()
    stop = [r for r in rows if r.startswith("gpu-02") and "systemd.stop_disable" in r]
    assert "stop-autostarted-inference" in stop[0] and "auto, limit 3 hosts/hour" in stop[0]
    assert "when unit vllm-*; incident vm_restart" in stop[0]
    assert "(none)" in stop[1] and stop[1].rstrip().endswith("approve")
    reboot = [r for r in rows if r.startswith("gpu-01") and "host.reboot" in r]
    assert reboot == [r for r in reboot if "reboots" in r and "two-person" in r]
    assert len(reboot) == 1
    rc, out, _ = run(capsys, "policy", "check", "--config", str(config(tmp_path, "redis://x")),
                     "--param", "unit=sshd.service", "--kind", "vm_restart")
    assert not [r for r in out.splitlines() if "stop-autostarted" in r]


def test_check_refuses_a_bad_policy_with_the_key(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("policies: [{name: p, mode: auto, limit: {max_hosts: -1}}]\n")
    rc, _, err = run(capsys, "policy", "check", "--config", str(path))
    assert rc == 2 and "key 'policies.0.limit.max_hosts'" in err


def test_replay_says_what_would_have_run_and_what_hit_the_limit(
        tmp_path: Path, redis: Redis, redis_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    store, now = IncidentStore(redis, group_wait_s=0), time.time()
    audit = AuditLog(redis)
    for i in range(1, 5):
        inc, _ = store.open_or_fold(Alert("agent", f"gpu-0{i}", "vm_restart"))
        AuditLog(redis, clock=at(now - 600 + i)).append(
            inc.id, "UALICE", "action.started",
            {"kind": "systemd.stop_disable", "params": {"unit": "vllm-kimi.service"},
             "host": f"gpu-0{i}"})
    reboot, _ = store.open_or_fold(Alert("agent", "gpu-01", "gpu_xid"))
    audit.append(reboot.id, "UBOB", "action.started", {"kind": "host.reboot", "params": {},
                                                        "host": "gpu-01"})
    audit.append(reboot.id, "policy", "action.started", {"kind": "host.reboot", "params": {},
                                                          "host": "gpu-02"})  # not a person's
    audit.append(reboot.id, "UBOB", "approval.approved", {"kind": "host.reboot"})
    rc, out, err = run(capsys, "policy", "replay", "--since", "7d", "--config",
                       str(config(tmp_path, redis_url)))
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 6
    assert all("would have run automatically" in line for line in lines[:3])
    assert "would still ask (limit reached: 3 hosts in the last hour (gpu-01, gpu-02, gpu-03))" \
        in lines[3]
    assert "reboots" in lines[4] and lines[4].endswith("would still ask")
    assert lines[5] == ("5 approved action(s): 3 would have run automatically, 1 would have "
                        "hit a limit, window or the breaker")


def test_replay_refuses_a_bad_period_and_a_dead_redis(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    path = config(tmp_path, "redis://127.0.0.1:1/0")
    rc, _, err = run(capsys, "policy", "replay", "--since", "a week", "--config", str(path))
    assert rc == 2 and "invalid --since" in err
    rc, _, err = run(capsys, "policy", "replay", "--config", str(path))
    assert rc == 1 and "cannot read the audit stream at redis://127.0.0.1:1/0" in err


def test_breaker_shows_its_state_and_reset_closes_it_audited(
        tmp_path: Path, redis: Redis, redis_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    from storage.policy_limits import BREAKER_RESET, PolicyLimits

    path = config(tmp_path, redis_url, hosts=2)  # cap: min(10, floor(1.0 × 2)) = 2
    rc, out, _ = run(capsys, "policy", "breaker", "--config", str(path))
    assert rc == 0 and out.strip() == "circuit breaker closed: automatic actions allowed (cap 2)"
    limits, now = PolicyLimits(redis, fleet_cap=2), time.time()
    assert [limits.try_count("p", h, now, 3600, 0).tripped
            for h in ("gpu-01", "gpu-02", "gpu-03")] == [False, False, True]
    rc, out, _ = run(capsys, "policy", "breaker", "--config", str(path))
    assert out.strip() == ("circuit breaker open: 2 hosts acted on automatically in the last "
                           "hour (gpu-01, gpu-02), cap 2; every automatic action asks for a "
                           "click")
    rc, out, _ = run(capsys, "policy", "breaker", "--reset", "--config", str(path))
    assert rc == 0 and "circuit breaker closed by cli:" in out
    assert not limits.breaker().open
    assert [e.action for e in AuditLog(redis).recent()].count(BREAKER_RESET) == 1
    rc, out, _ = run(capsys, "policy", "breaker", "--reset", "--config", str(path))
    assert out.strip().startswith("circuit breaker closed: automatic")  # nothing to close
    assert [e.action for e in AuditLog(redis).recent()].count(BREAKER_RESET) == 1
