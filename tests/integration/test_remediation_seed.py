"""The story's action against the seed host over real sshd: run once, verify, no-op, revert.

Audited into the real AuditLog on the real Redis fixture.
"""

from __future__ import annotations

import json
from dataclasses import replace

from bot.remediation import ActionResult, Outcome, RemediationOptions, execute, revert_result
from bot.sim.sshd import SimHost
from bot.ssh.base import SSHTarget
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog
from tests.fixtures.remediation import gpu_used, session_commands, tool_calls, unit

UNIT = "vllm-kimi-k25-int4.service"
EVIDENCE = "sha256:" + "ab" * 32


def _stop_disable(
    pool: ParamikoPool,
    host: SimHost,
    options: RemediationOptions,
    audit: AuditLog | None = None,
    target: SSHTarget | None = None,
    dry_run: bool = False,
) -> ActionResult:
    return execute(
        pool,
        target or host.ssh_target(),
        "systemd.stop_disable",
        {"unit": UNIT},
        approver="U0AAAAAAA",
        evidence_hash=EVIDENCE,
        audit=audit,
        options=options,
        incident_id="INC-7",
        dry_run=dry_run,
    )


def test_stop_disable_runs_each_command_once_and_frees_all_eight_gpus(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions, audit_log: AuditLog
) -> None:
    assert min(gpu_used(seed_sim)) >= 77_000
    result = _stop_disable(rem_pool, seed_sim, fast_options, audit_log)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert tool_calls(seed_sim, "systemctl", "stop") == [["stop", UNIT]]
    assert tool_calls(seed_sim, "systemctl", "disable") == [["disable", UNIT]]
    assert result.summary.startswith(f"stopped and disabled {UNIT}; 8/8 GPUs free (max 0 MiB)")
    assert result.verification is not None and result.verification.ok
    assert [g["used_mib"] for g in result.verification.evidence["gpus"]] == [0.0] * 8
    assert gpu_used(seed_sim) == [0] * 8
    state = unit(seed_sim, UNIT)
    assert (state["active_state"], state["unit_file_state"]) == ("inactive", "disabled")
    assert result.captured is not None and result.captured.units[0].main_pid == 440
    assert [c.command for c in result.commands] == [
        f"systemctl stop {UNIT}",
        f"systemctl disable {UNIT}",
    ]
    assert all(c.exit_status == 0 and not c.timed_out for c in result.commands)


def test_everything_is_audited_with_commands_statuses_approver_and_evidence_hash(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions, audit_log: AuditLog
) -> None:
    _stop_disable(rem_pool, seed_sim, fast_options, audit_log)
    timeline = audit_log.timeline("INC-7")
    assert [e.action for e in timeline] == ["action.started", "action.succeeded"]
    assert {e.actor for e in timeline} == {"U0AAAAAAA"}
    assert {e.evidence_hash for e in timeline} == {EVIDENCE}
    assert timeline[0].detail["planned"] == [f"systemctl stop {UNIT}", f"systemctl disable {UNIT}"]
    done = timeline[1].detail
    assert [(c["command"], c["exit_status"]) for c in done["commands"]] == [
        (f"systemctl stop {UNIT}", 0),
        (f"systemctl disable {UNIT}", 0),
    ]
    assert "Removed" in done["commands"][1]["stderr"]
    assert all(c["duration_s"] > 0 for c in done["commands"])
    assert done["verification"]["ok"] is True and done["outcome"] == "succeeded"


def test_running_it_again_is_a_noop_that_says_so(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions, audit_log: AuditLog
) -> None:
    _stop_disable(rem_pool, seed_sim, fast_options, audit_log)
    again = _stop_disable(rem_pool, seed_sim, fast_options, audit_log)
    assert again.outcome is Outcome.NOOP
    assert "nothing to do (already inactive; unit file already disabled)" in again.summary
    assert all(c.skipped for c in again.commands)
    assert len(tool_calls(seed_sim, "systemctl", "stop")) == 1
    assert len(tool_calls(seed_sim, "systemctl", "disable")) == 1
    assert audit_log.timeline("INC-7")[-1].action == "action.noop"


def test_revert_from_the_stored_result_restores_file_and_active_state(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions, audit_log: AuditLog
) -> None:
    done = _stop_disable(rem_pool, seed_sim, fast_options, audit_log)
    stored = json.loads(json.dumps(done.to_dict()))  # as kept in incident meta
    # success returns as soon as the unit is back: a long deadline costs nothing unless
    # the machine is slow, and then it must not fail the revert
    patient = replace(fast_options, verify_timeout_s=60.0)
    rem_pool.close()  # a restarted bot: new pool, only the stored dict
    fresh = ParamikoPool()
    try:
        back = revert_result(
            fresh,
            seed_sim.ssh_target(),
            stored,
            approver="U0BBBBBBB",
            evidence_hash=None,
            audit=audit_log,
            options=patient,
        )
    finally:
        fresh.close()
    assert back.outcome is Outcome.SUCCEEDED, back.summary
    state = unit(seed_sim, UNIT)
    assert (state["active_state"], state["unit_file_state"]) == ("active", "enabled")
    assert state["main_pid"] not in (0, 440)
    assert min(gpu_used(seed_sim)) >= 77_000  # memory re-taken
    assert "8/8 GPUs hold memory" in back.summary
    assert tool_calls(seed_sim, "systemctl", "enable") == [["enable", UNIT]]
    assert tool_calls(seed_sim, "systemctl", "start") == [["start", UNIT]]
    assert [c.skipped for c in back.commands if c.name == "unmask"] == ["unit file not masked"]
    assert audit_log.timeline("INC-7")[-1].actor == "U0BBBBBBB"


def test_dry_run_runs_nothing_on_the_host(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions, audit_log: AuditLog
) -> None:
    before = seed_sim.command_log()
    result = _stop_disable(rem_pool, seed_sim, fast_options, audit_log, dry_run=True)
    assert result.outcome is Outcome.DRY_RUN
    assert list(result.planned) == [f"systemctl stop {UNIT}", f"systemctl disable {UNIT}"]
    assert seed_sim.command_log() == before
    assert unit(seed_sim, UNIT)["active_state"] == "active"
    assert [e.action for e in audit_log.timeline("INC-7")] == ["action.dry_run"]


def test_non_root_target_sends_sudo_n_exactly_once(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    target = replace(seed_sim.ssh_target(), sudo=True)
    result = _stop_disable(rem_pool, seed_sim, fast_options, target=target)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    commands = session_commands(seed_sim)
    asked = [c for c in commands if "sudo -n -l" in c]  # the preflight: allowed as written?
    assert len(asked) == 2 and all("sudo -n -l systemctl" in c for c in asked)
    sent = [c for c in commands if ("systemctl stop" in c or "disable" in c) and c not in asked]
    assert len(sent) == 2 and all(c.count("sudo -n") == 1 for c in sent)
    assert all("sudo -n systemctl" in c and not c.startswith("sudo") for c in sent)
    assert [c for c in tool_calls(seed_sim, "sudo") if "-l" not in c] == [
        ["-n", "systemctl", "stop", UNIT],
        ["-n", "systemctl", "disable", UNIT],
    ]


def test_unreachable_host_is_an_outcome_and_nothing_runs(
    rem_pool: ParamikoPool, fast_options: RemediationOptions, audit_log: AuditLog, seed_sim: SimHost
) -> None:
    from bot.core.procs import free_port

    target = replace(seed_sim.ssh_target(), port=free_port())
    result = _stop_disable(rem_pool, seed_sim, fast_options, audit_log, target=target)
    assert result.outcome is Outcome.UNREACHABLE
    assert "nothing was run" in result.summary and result.commands == ()
    assert seed_sim.command_log() == []
    assert audit_log.timeline("INC-7")[-1].action == "action.unreachable"
