"""The escalation ladder on a simulated host: SIGTERM → SIGKILL → GPU reset, each rung its
own execute (its own approval) and proposed by ``next_step`` only after the previous one
was verified to fail. Then the lasting fix: the drop-in, applied and reverted."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.remediation import ActionResult, Outcome, execute, revert_result
from bot.remediation.catalog import dropin_path
from bot.remediation.ladder import next_step
from bot.sim import sandbox
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from storage.audit import AuditLog
from tests.fixtures.need import need
from tests.fixtures.remediation import FAST, gpu_used, tool_calls, unit
from tests.fixtures.sim import SimFactory

OPTS = replace(FAST, verify_timeout_s=2.0)
SEED_UNIT = "vllm-kimi-k25-int4.service"


def act(pool: ParamikoPool, host: SimHost, step: dict[str, object], approver: str,
        audit: AuditLog) -> ActionResult:
    params = {k: str(v) for k, v in dict(step["params"]).items()}  # type: ignore[call-overload]
    return execute(pool, host.ssh_target(), str(step["kind"]), params, approver=approver,
                   evidence_hash=None, audit=audit, options=OPTS, incident_id="INC-L")


def test_sigterm_ignored_goes_to_sigkill_then_a_wedged_gpu_goes_to_reset(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    host = sim_factory("ladder")
    first = act(rem_pool, host, {"kind": "process.sigterm", "params": {"pid": 777}}, "U1",
                audit_log)
    assert first.outcome is Outcome.FAILED, first.summary
    assert "PID 777 is still running" in first.summary
    assert tool_calls(host, "kill") == [["-TERM", "777"]]  # no SIGKILL without its approval
    assert first.verification is not None and first.verification.elapsed_s >= 2.0  # TimeoutStopSec

    second_step = next_step(first)
    assert second_step is not None and second_step["kind"] == "process.sigkill"
    second = act(rem_pool, host, second_step, "U2", audit_log)
    assert second.outcome is Outcome.FAILED, second.summary  # gone, but memory stays held
    assert tool_calls(host, "kill") == [["-TERM", "777"], ["-KILL", "777"]]
    assert gpu_used(host)[:2] == [40000, 40000]
    assert tool_calls(host, "nvidia-smi", "--gpu-reset") == []

    third_step = next_step(second)
    assert third_step is not None
    assert third_step["kind"] == "gpu.reset"
    assert third_step["params"] == {"gpu": "0", "release": ""}  # the daemons by unit name
    third = act(rem_pool, host, third_step, "U3", audit_log)
    assert third.outcome is Outcome.SUCCEEDED, third.summary
    assert gpu_used(host)[0] == 0 and gpu_used(host)[1] == 40000
    assert next_step(third) is None
    approvers = [e.actor for e in audit_log.timeline("INC-L") if e.action == "action.started"]
    assert approvers == ["U1", "U2", "U3"]


def test_gpu_reset_with_a_process_on_the_gpu_is_refused(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    host = sim_factory("ladder")
    result = act(rem_pool, host, {"kind": "gpu.reset", "params": {"gpu": 0}}, "U1", audit_log)
    assert result.outcome is Outcome.REFUSED, result.summary
    assert "GPU 0 still has processes on it (777)" in result.summary
    assert tool_calls(host, "nvidia-smi", "--gpu-reset") == []
    assert next_step(result) is None


def test_a_gpu_wedged_with_no_process_is_reset(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    host = sim_factory("ladder")
    assert gpu_used(host)[2] == 30000
    result = act(rem_pool, host, {"kind": "gpu.reset", "params": {"gpu": 2}}, "U1", audit_log)
    assert result.outcome is Outcome.SUCCEEDED, result.summary
    assert tool_calls(host, "nvidia-smi", "--gpu-reset") == [["--gpu-reset", "-i", "2"]]
    assert gpu_used(host)[2] == 0


def _show(host: SimHost) -> dict[str, str]:
    out = subprocess.run(host.ssh_argv(
        f"systemctl show {SEED_UNIT} -p Restart,TimeoutStopUSec,DropInPaths"),
        capture_output=True, text=True, timeout=30).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_dropin_is_applied_and_reverted_and_systemctl_show_reflects_both(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    need(sandbox.available(), "sim sandbox needs root and unshare")
    host = sim_factory("seed")
    path = dropin_path(SEED_UNIT)
    assert _show(host) == {"Restart": "always", "TimeoutStopUSec": "1min 30s", "DropInPaths": ""}
    applied = act(rem_pool, host, {"kind": "systemd.dropin", "params": {"unit": SEED_UNIT}},
                  "U1", audit_log)
    assert applied.outcome is Outcome.SUCCEEDED, applied.summary
    assert _show(host) == {"Restart": "on-failure", "TimeoutStopUSec": "30s", "DropInPaths": path}
    assert not Path(path).exists()  # written in the sim's root, never on this machine
    assert applied.revertable and applied.revert_params == {"unit": SEED_UNIT}

    reverted = revert_result(rem_pool, host.ssh_target(), applied.to_dict(), approver="U2",
                             evidence_hash=None, audit=audit_log, options=OPTS)
    assert reverted.kind == "systemd.dropin_revert"
    assert reverted.outcome is Outcome.SUCCEEDED, reverted.summary
    assert _show(host) == {"Restart": "always", "TimeoutStopUSec": "1min 30s", "DropInPaths": ""}
    kinds = [e.detail.get("kind") for e in audit_log.timeline("INC-L")
             if e.action == "action.succeeded"]
    assert kinds == ["systemd.dropin", "systemd.dropin_revert"]


def test_dropin_guard_keeps_the_unit_down_while_a_reservation_marker_exists(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    need(sandbox.available(), "sim sandbox needs root and unshare")
    host = sim_factory("seed")
    act(rem_pool, host, {"kind": "systemd.dropin", "params": {"unit": SEED_UNIT}}, "U1",
        audit_log)
    marker = "/run/incident-bot/gpu-reservation"
    subprocess.run(host.ssh_argv(f"mkdir -p /run/incident-bot && touch {marker} && "
                                 f"systemctl stop {SEED_UNIT} && systemctl start {SEED_UNIT}"),
                   capture_output=True, timeout=30)
    assert unit(host, SEED_UNIT)["active_state"] == "failed"
    assert max(gpu_used(host)) == 0
    assert not Path(marker).exists()


A100_NVSWITCH: dict[str, Any] = {
    "gpus": [{"count": 2, "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920},
             {"name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920,
              "memory_reserved_mib": 30000}],
    "units": {"nvidia-fabricmanager.service": {
        "description": "NVIDIA fabric manager service", "active_state": "active",
        "unit_file_state": "enabled",
        "exec_start": "/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg"}},
    "processes": [{"pid": 505, "args": "/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/"
                   "fabricmanager.cfg", "comm": "nv-fabricmanage", "holds_devices": True,
                   "owner": {"kind": "systemd", "name": "nvidia-fabricmanager.service"}}],
}


def test_one_gpu_of_an_nvswitch_baseboard_before_hopper_is_refused_every_gpu_proposed(
    sim_factory: SimFactory, rem_pool: ParamikoPool, audit_log: AuditLog
) -> None:
    host = sim_factory("ladder", overrides=A100_NVSWITCH)
    result = act(rem_pool, host, {"kind": "gpu.reset", "params": {"gpu": 2}}, "U1", audit_log)
    assert result.outcome is Outcome.REFUSED, result.summary
    assert "NVSwitch baseboard before Hopper: GPU 2 cannot be reset alone" in result.summary
    assert tool_calls(host, "nvidia-smi", "--gpu-reset") == []
    assert gpu_used(host)[2] == 30000
    ((kind, params, reason),) = [(p["kind"], p["params"], p["reason"]) for p in result.proposals]
    assert (kind, params["gpu"]) == ("gpu.reset", "all")
    assert "unit:nvidia-fabricmanager.service" in params["release"]  # stopped for this one
    assert reason.startswith("Reset every GPU on gpu-03 (NVSwitch before Hopper: one GPU "
                             "cannot be reset alone)")
