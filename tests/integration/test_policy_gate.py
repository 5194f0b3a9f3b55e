"""The gate the flow calls, on a real redis-server: four hosts under max_hosts 3 → three
run alone and the fourth asks, saying why; shadow counts nothing; every decision audited."""

from __future__ import annotations

from pathlib import Path

from redis import Redis

from bot.config.policy import policy_from_settings
from bot.config.settings import Settings, load_settings
from bot.domain.approval import may_decide
from bot.domain.policy import ActionRef, PolicyMode
from bot.remediation.policy_gate import AUDIT_ACTION, PolicyGate, gate_from_settings, refusal
from storage.audit import AuditLog
from storage.stores import Stores

SATURDAY = 1_784_376_000.0  # 2026-07-18 12:00 UTC: outside Mon-Fri office hours
CONFIG = """
slack: {approvers: [UALICE]}
hosts:
  gpu-01: {ssh: root@127.0.0.1:22}
  gpu-02: {ssh: root@127.0.0.1:22}
  gpu-03: {ssh: root@127.0.0.1:22}
  gpu-04: {ssh: root@127.0.0.1:22}
policies:
  - name: stop-autostarted-inference
    match: {action: systemd.stop_disable, unit: "vllm-*", hosts: "gpu-*", kinds: [vm_restart]}
    mode: auto
    limit: {max_hosts: 3, per: 1h}
    approvers: [S0GPUOPS]
    window: {not_during: "Mon-Fri 09:00-18:00 Europe/Berlin"}
  - name: shadow-masks
    match: {action: systemd.mask}
    mode: shadow
policy_limits: {max_hosts_per_hour: 10, max_fraction: 1.0}
"""
STOP = ActionRef("systemd.stop_disable", {"unit": "vllm-kimi-k25-int4.service"})


def gate(tmp_path: Path, redis: Redis, now: float = SATURDAY) -> tuple[Settings, PolicyGate]:
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    settings = load_settings(path)
    return settings, gate_from_settings(settings, Stores(redis, redis), clock=lambda: now)


def test_three_hosts_run_alone_and_the_fourth_asks(tmp_path: Path, redis: Redis) -> None:
    _, g = gate(tmp_path, redis)
    modes = [g.decide(STOP, f"gpu-0{i}", "vm_restart", f"INC-{i}") for i in (1, 2, 3, 4)]
    assert [d.mode for d in modes] == [PolicyMode.AUTO] * 3 + [PolicyMode.APPROVE]
    assert modes[3].reason == ("limit reached: 3 hosts in the last hour "
                               "(gpu-01, gpu-02, gpu-03)")
    again = g.decide(STOP, "gpu-02", "vm_restart", "INC-5")  # counted once already
    assert again.mode is PolicyMode.AUTO
    audited = [e for e in AuditLog(redis).recent() if e.action == AUDIT_ACTION]
    assert len(audited) == 5 and audited[3].incident_id == "INC-4"
    assert audited[3].detail["policy"] == "stop-autostarted-inference"
    assert audited[3].detail["mode"] == "approve" and audited[3].detail["configured"] == "auto"


def test_shadow_and_office_hours_count_nothing(tmp_path: Path, redis: Redis) -> None:
    _, g = gate(tmp_path, redis)
    mask = ActionRef("systemd.mask", {"unit": "vllm-x.service"})
    d = g.decide(mask, "gpu-01", "vm_restart", "INC-1")
    assert d.mode is PolicyMode.SHADOW
    assert d.reason.startswith("would have run systemd.mask under policy shadow-masks")
    _, office = gate(tmp_path, redis, now=1_784_109_600.0)  # Wed 2026-07-15 10:00 UTC
    d = office.decide(STOP, "gpu-01", "vm_restart", "INC-2")
    assert d.mode is PolicyMode.APPROVE and "Mon-Fri 09:00-18:00" in d.reason
    assert g.counter.hosts("stop-autostarted-inference", 3600) == ()


def test_evaluate_writes_nothing(tmp_path: Path, redis: Redis) -> None:
    _, g = gate(tmp_path, redis)
    d = g.evaluate(STOP, "gpu-01", "vm_restart")
    assert d.mode is PolicyMode.AUTO and redis.dbsize() == 0


def test_the_policy_names_who_may_approve_instead(tmp_path: Path, redis: Redis) -> None:
    settings, g = gate(tmp_path, redis)
    fourth = [g.decide(STOP, f"gpu-0{i}", "vm_restart", "INC-1") for i in (1, 2, 3, 4)][-1]
    rules = g.approval_policy(fourth, policy_from_settings(settings), STOP.kind)
    assert not may_decide(rules, STOP.kind, "UALICE", (), "bot")  # global approver, not here
    assert may_decide(rules, STOP.kind, "UBOB", ("S0GPUOPS",), "bot")
    assert may_decide(rules, "host.reboot", "UALICE", (), "bot")  # other kinds unchanged
    text = refusal(fourth, "S0GPUOPS", STOP.kind, "gpu-04")
    assert text == ("policy stop-autostarted-inference lets only S0GPUOPS approve "
                    "systemd.stop_disable on gpu-04")


def test_the_breaker_from_the_inventory_size(tmp_path: Path, redis: Redis) -> None:
    """max_fraction 0.5 of four hosts: the third automatic host trips the breaker."""
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG.replace("max_fraction: 1.0", "max_fraction: 0.5"))
    g = gate_from_settings(load_settings(path), Stores(redis, redis),
                                  clock=lambda: SATURDAY)
    modes = [g.decide(STOP, f"gpu-0{i}", "vm_restart", "INC-1").mode for i in (1, 2, 3)]
    assert modes == [PolicyMode.AUTO, PolicyMode.AUTO, PolicyMode.APPROVE]
    later = g.evaluate(STOP, "gpu-04", "vm_restart")
    assert later.mode is PolicyMode.APPROVE and later.reason.startswith("circuit breaker open")


def test_gate_gives_the_rules_and_fields_for_the_approval(tmp_path: Path, redis: Redis) -> None:
    settings, g = gate(tmp_path, redis)
    base = policy_from_settings(settings)
    gated = g.gate(STOP, "gpu-01", "vm_restart", "INC-1", base)
    assert gated.decision.mode is PolicyMode.AUTO
    assert gated.extra == {"policy": "stop-autostarted-inference", "policy_mode": "auto",
                           "host": "gpu-01"}
    assert gated.rules.approvers_for(STOP.kind) == {"S0GPUOPS"}
    plain = g.gate(ActionRef("disk.cleanup", {}), "gpu-01", "disk_full", "INC-2", base)
    assert plain.extra == {} and plain.rules is base
    assert plain.decision.mode is PolicyMode.APPROVE and plain.decision.policy is None
