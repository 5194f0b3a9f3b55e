"""What the bot says when the world does not cooperate: deadlines, respawns, holders that
come back, a journal to vacuum, a mask systemd refuses. All over real sshd."""

from __future__ import annotations

import re
from dataclasses import replace

from bot.remediation import ActionResult, Outcome, RemediationOptions, execute
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog
from tests.fixtures.remediation import gpu_used, tool_calls, unit
from tests.fixtures.sim import SimFactory

UNIT = "vllm-kimi-k25-int4.service"
SLOW_STOP = {"units": {UNIT: {"stop_delay_s": 2.5}}}


def _act(
    pool: ParamikoPool,
    host: SimHost,
    kind: str,
    params: dict[str, str],
    options: RemediationOptions,
    audit: AuditLog | None = None,
) -> ActionResult:
    return execute(
        pool,
        host.ssh_target(),
        kind,
        params,
        approver="U0AAAAAAA",
        evidence_hash=None,
        audit=audit,
        options=options,
        incident_id="INC-9",
    )


def test_stop_past_its_deadline_is_reprobed_and_reported_done(
    sim_factory,
    rem_pool: ParamikoPool,
    fast_options: RemediationOptions,
    audit_log: AuditLog,
) -> None:
    host = sim_factory("seed", overrides=SLOW_STOP)
    options = replace(fast_options, step_timeout_s=1.0, reprobe_s=4.0)
    result = _act(rem_pool, host, "systemd.stop_disable", {"unit": UNIT}, options, audit_log)
    stop = result.commands[0]
    assert stop.timed_out and stop.timeout_s == 1.0
    assert stop.reprobe is not None and stop.reprobe["effect"] is True
    assert stop.reprobe["active_state"] == "inactive"
    assert result.outcome is Outcome.TIMED_OUT_BUT_DONE, result.summary
    assert "hit its 1 s deadline, yet the re-probe shows it worked" in result.summary
    assert "8/8 GPUs free" in result.summary
    assert len(tool_calls(host, "systemctl", "stop")) == 1
    assert audit_log.timeline("INC-9")[-1].action == "action.timed_out_but_done"


def test_stop_still_pending_after_the_deadline_is_timed_out_with_what_holds_the_gpus(
    sim_factory: SimFactory, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    host = sim_factory("seed", overrides={"units": {UNIT: {"stop_delay_s": 30}}})
    options = replace(fast_options, step_timeout_s=0.5, reprobe_s=0.5, verify_timeout_s=1.0)
    result = _act(rem_pool, host, "systemd.stop_disable", {"unit": UNIT}, options)
    assert result.outcome is Outcome.TIMED_OUT, result.summary
    stop, disable = result.commands
    assert stop.timed_out and stop.reprobe is not None and stop.reprobe["effect"] is False
    assert stop.reprobe["active_state"] == "deactivating"
    assert disable.exit_status == 0  # the boot-time half still ran
    assert f"{UNIT} is deactivating, unit file disabled" in result.summary
    assert f"PID 440 ({UNIT}) on GPU 0-7" in result.summary
    assert unit(host, UNIT)["unit_file_state"] == "disabled"


def test_a_watchdog_restart_is_reported_as_a_respawn_not_success(
    sim_factory,
    rem_pool: ParamikoPool,
    fast_options: RemediationOptions,
    audit_log: AuditLog,
) -> None:
    host = sim_factory("respawn")
    result = _act(rem_pool, host, "systemd.stop_disable", {"unit": UNIT}, fast_options, audit_log)
    assert result.outcome is Outcome.RESPAWNED, result.summary
    new_pid = unit(host, UNIT)["main_pid"]
    assert new_pid not in (0, 440)
    assert f"{UNIT} came back: PID {new_pid} (was 440)" in result.summary
    assert result.verification is not None and result.verification.respawned
    assert min(gpu_used(host)) >= 77_000
    assert audit_log.timeline("INC-9")[-1].action == "action.respawned"


def test_terminate_a_unit_process_with_restart_always_reports_the_new_pid(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    params = {"pid": "440", "override": "yes"}  # refused without (issue 17)
    result = _act(rem_pool, seed_sim, "process.terminate", params, fast_options)
    assert result.outcome is Outcome.RESPAWNED, result.summary
    new_pid = unit(seed_sim, UNIT)["main_pid"]
    assert f"{UNIT} came back: PID {new_pid} (was 440)" in result.summary
    assert tool_calls(seed_sim, "kill") == [["-TERM", "440"]]


def test_terminate_a_stray_holder_term_frees_the_gpus_and_kill_is_not_needed(
    sim_factory: SimFactory, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    # the seed's PID 440 replaced by a stray process that nothing restarts
    stray = {
        "pid": 440,
        "args": "python3 train.py --resume",
        "gpu_memory_mib": 30000,
        "owner": {"kind": "none"},
    }
    host = sim_factory(
        "seed", overrides={"processes": [stray], "units": {UNIT: {"active_state": "inactive"}}}
    )
    assert gpu_used(host) == [30000] * 8
    result = _act(rem_pool, host, "process.terminate", {"pid": "440"}, fast_options)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    term, kill = result.commands
    assert term.command == "env kill -TERM 440" and term.exit_status == 0
    assert kill.skipped is not None and kill.skipped.startswith("exited")
    assert tool_calls(host, "kill") == [["-TERM", "440"]]
    assert re.match(r"sent SIGTERM to PID 440, which exited [\d.]+ s later \(no SIGKILL needed\); "
                    r"8/8 GPUs free \(max 0 MiB\)", result.summary), result.summary
    again = _act(rem_pool, host, "process.terminate", {"pid": "440"}, fast_options)
    assert again.outcome is Outcome.NOOP and "process already gone" in again.summary


def test_journal_vacuum_shrinks_the_journal(
    sim_factory: SimFactory, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    host = sim_factory("seed")
    before = host.state()["journal"]["usage"]
    result = _act(rem_pool, host, "disk.journal_vacuum", {"size": "500M"}, fast_options)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    after = host.state()["journal"]["usage"]
    assert after < before and after <= 500 << 20
    assert result.verification is not None
    ev = result.verification.evidence
    assert ev["before_bytes"] > ev["after_bytes"]
    assert tool_calls(host, "journalctl", "--vacuum-size=500M") == [["--vacuum-size=500M"]]
    assert "journal 2.6 GiB" in result.summary and "(limit 500M)" in result.summary
    again = _act(rem_pool, host, "disk.journal_vacuum", {"size": "500M"}, fast_options)
    assert again.outcome is Outcome.NOOP


def test_mask_of_a_unit_whose_file_lives_in_etc_fails_its_preflight_with_nothing_changed(
    seed_sim: SimHost, rem_pool: ParamikoPool, fast_options: RemediationOptions
) -> None:
    # issue 17: this used to stop the unit, then fail the mask (half an action)
    result = _act(rem_pool, seed_sim, "systemd.mask", {"unit": UNIT}, fast_options)
    assert result.outcome is Outcome.REFUSED, result.summary
    assert f"/etc/systemd/system/{UNIT}" in result.summary
    assert "nothing was changed" in result.summary
    assert [p["kind"] for p in result.proposals] == [
        "systemd.stop_disable", "systemd.dropin", "systemd.mask_force"]
    assert "the file is lost" in result.proposals[2]["risk"]
    assert tool_calls(seed_sim, "systemctl", "stop") == []
    assert tool_calls(seed_sim, "systemctl", "mask") == []
    assert unit(seed_sim, UNIT)["active_state"] == "active"
    assert unit(seed_sim, UNIT)["unit_file_state"] == "enabled"
    assert not result.revertable
