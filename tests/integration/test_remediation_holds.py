"""Issue 17 on simulated hosts: verification that waits out systemd's restart delay,
preflight refusals that change nothing, and a part-way failure that is rolled back."""

from __future__ import annotations

import time
from dataclasses import replace

from bot.remediation import ActionResult, Outcome, RemediationOptions, execute, offers
from bot.sim.sshd import SimHost
from bot.ssh.base import SSHTarget
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog
from tests.fixtures.remediation import FAST, gpu_used, tool_calls, unit
from tests.fixtures.sim import SimFactory

UNIT = "vllm-kimi-k25-int4.service"
OPTS = replace(FAST, restart_margin_s=1.0, verify_timeout_s=3.0)


def act(pool: ParamikoPool, host: SimHost, kind: str, params: dict[str, str],
        audit: AuditLog | None = None, target: SSHTarget | None = None,
        options: RemediationOptions = OPTS) -> ActionResult:
    return execute(pool, target or host.ssh_target(), kind, params, approver="U0AAAAAAA",
                   evidence_hash="ev-1", audit=audit, options=options, incident_id="INC-17")


def test_terminate_under_a_restarting_unit_is_refused_with_a_stop_proposal(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    host = sim_factory("respawn_10s")
    result = act(rem_pool, host, "process.terminate", {"pid": "440"}, audit_log)
    assert result.outcome is Outcome.REFUSED, result.summary
    assert "GPUs free" not in result.summary
    assert f"runs under {UNIT} (Restart=always)" in result.summary
    assert "10 s after it dies" in result.summary
    assert result.proposals[0]["kind"] == "systemd.stop_disable"
    assert result.proposals[0]["params"] == {"unit": UNIT}
    assert tool_calls(host, "kill") == []
    assert min(gpu_used(host)) >= 77_000
    assert audit_log.timeline("INC-17")[-1].action == "action.refused"


def test_terminate_with_override_is_audited_and_reports_the_late_respawn(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    host = sim_factory("respawn_10s")
    result = act(rem_pool, host, "process.terminate", {"pid": "440", "override": "yes"},
                 audit_log)
    assert result.outcome is Outcome.RESPAWNED, result.summary
    new_pid = unit(host, UNIT)["main_pid"]
    assert new_pid not in (0, 440)
    assert f"PID {new_pid} (was 440)" in result.summary and "8/8 GPUs free" not in result.summary
    assert [p.kind for p in offers(result)] == ["systemd.stop_disable"]
    actions = [e.action for e in audit_log.timeline("INC-17")]
    assert actions == ["action.started", "action.override", "action.respawned"]


def test_stop_disable_verifies_only_after_the_restart_window(
    sim_factory: SimFactory, rem_pool: ParamikoPool
) -> None:
    host = sim_factory("respawn_10s")
    t0 = time.monotonic()
    result = act(rem_pool, host, "systemd.stop_disable", {"unit": UNIT})
    wall = time.monotonic() - t0
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert result.verification is not None
    ev = result.verification.evidence
    assert ev["restart_window_s"] == 11.0  # RestartUSec=10s read from systemctl show + margin
    assert ev["checked_after_s"] >= ev["restart_window_s"]
    assert result.summary.startswith(f"stopped and disabled {UNIT}; 8/8 GPUs free")
    assert max(gpu_used(host)) == 0
    print(f"stop_disable with RestartSec=10: {wall:.1f} s wall")


def test_sudo_rules_that_refuse_a_command_fail_the_preflight_with_nothing_changed(
    sim_factory: SimFactory, rem_pool: ParamikoPool
) -> None:
    host = sim_factory("seed", overrides={"sudo_denied": [f"systemctl disable {UNIT}"]})
    target = replace(host.ssh_target(), sudo=True)
    result = act(rem_pool, host, "systemd.stop_disable", {"unit": UNIT}, target=target)
    assert result.outcome is Outcome.REFUSED, result.summary
    assert f"do not allow `sudo -n systemctl disable {UNIT}`" in result.summary
    assert [c for c in tool_calls(host, "sudo") if c[:2] != ["-n", "-l"]] == []
    assert tool_calls(host, "systemctl", "stop") == []
    assert unit(host, UNIT)["active_state"] == "active"


def test_a_part_way_failure_is_rolled_back_and_both_are_reported(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    host = sim_factory("seed", overrides={"units": {UNIT: {"fail_verbs": ["disable"]}}})
    result = act(rem_pool, host, "systemd.stop_disable", {"unit": UNIT}, audit_log)
    assert result.outcome is Outcome.FAILED, result.summary
    assert f"`systemctl disable {UNIT}` failed (exit 1): Failed to disable unit: Access denied" \
        in result.summary
    assert f"rolled back what it had done: `systemctl start {UNIT}` ok" in result.summary
    assert [r.name for r in result.rollback if r.ran] == ["start"]
    after = unit(host, UNIT)
    assert after["active_state"] == "active" and after["unit_file_state"] == "enabled"
    stored = audit_log.timeline("INC-17")[-1].detail
    assert stored["rollback"][-1]["command"] == f"systemctl start {UNIT}"
    assert ActionResult.from_dict(stored).rollback == result.rollback


CID = "3f4e5d6c7b8a" + "0" * 52
IN_CONTAINER = {
    "units": {UNIT: {"active_state": "inactive"}},
    "containers": [{"id": CID, "name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                    "restart_policy": "always", "pid": 440}],
    "processes": [{"pid": 440, "args": "python3 -m vllm.entrypoints.openai.api_server",
                   "gpu_memory_mib": 77600, "owner": {"kind": "docker", "name": "vllm"}}],
}


def test_a_process_in_a_container_that_restarts_is_refused_then_seen_to_respawn(
    sim_factory: SimFactory, rem_pool: ParamikoPool
) -> None:
    host = sim_factory("seed", overrides=IN_CONTAINER)
    refused = act(rem_pool, host, "process.terminate", {"pid": "440"})
    assert refused.outcome is Outcome.REFUSED, refused.summary
    assert "container 3f4e5d6c7b8a (restart policy always)" in refused.summary
    assert tool_calls(host, "kill") == []
    forced = act(rem_pool, host, "process.terminate", {"pid": "440", "override": "yes"})
    assert forced.outcome is Outcome.RESPAWNED, forced.summary
    assert "8/8 GPUs free" not in forced.summary


def test_a_cron_jobs_process_is_refused_without_proposing_to_stop_cron(
    sim_factory: SimFactory, rem_pool: ParamikoPool
) -> None:
    job = {"pid": 440, "args": "python3 /opt/bench/gpu_burn.py", "gpu_memory_mib": 70000,
           "owner": {"kind": "cron", "name": "root"}}
    host = sim_factory("seed", overrides={
        "units": {UNIT: {"active_state": "inactive"}}, "processes": [job],
        "crontabs": {"root": ["*/5 * * * * python3 /opt/bench/gpu_burn.py"]}})
    result = act(rem_pool, host, "process.terminate", {"pid": "440"})
    assert result.outcome is Outcome.REFUSED, result.summary
    assert "started by cron.service from a crontab line" in result.summary
    assert result.proposals == ()
    assert tool_calls(host, "kill") == []
