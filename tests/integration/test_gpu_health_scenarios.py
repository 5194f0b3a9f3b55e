"""gpu_health over real SSH on every simulated GPU failure mode: the right verdict per
GPU, the right step, never "no GPUs", never a unit stop for a hardware fault."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.domain.findings import Diagnosis, Finding
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from playbooks import PlaybookOptions, run_playbook

FAST = PlaybookOptions(samples=2, sample_interval_s=0.1, command_timeout_s=4.0, expected_gpus=8)




def health(pool: ParamikoPool, host: SimHost) -> Diagnosis:
    return run_playbook(pool, host.ssh_target(), "gpu_health", options=FAST)


def verdicts(d: Diagnosis) -> list[str]:
    return [g["verdict"] for g in finding(d, "gpu.verdicts").evidence["gpus"]]


def finding(d: Diagnosis, code: str) -> Finding:
    return next(f for f in d.findings if f.code == code)


def step(d: Diagnosis) -> str | None:
    return next((f.evidence["step"] for f in d.findings if f.code == "gpu.step"), None)


def no_gpus_said(d: Diagnosis) -> bool:
    return any(f.code == "gpu.no_data" or "no GPU" in f.title for f in d.findings)


CASES = [
    ("gpu_xid79", ["busy"] * 3 + ["broken"] + ["busy"] * 4, "reboot"),
    ("gpu_ecc_dbe", ["busy"] * 5 + ["broken"] + ["busy"] * 2, "reset_gpu"),
    ("gpu_nvml_mismatch", ["unknown"] * 8, "reboot"),  # not read: a mismatch breaks no GPU
    ("gpu_missing", ["busy"] * 7 + ["broken"], "drain_and_ticket"),
    ("gpu_held_no_process", ["wedged"] * 8, "reset_gpu"),
    ("gpu_smi_hang", ["unknown"] * 8, "reboot"),  # not read, the inventory's count
]


@pytest.mark.parametrize(("scenario", "want", "want_step"), CASES)
def test_each_failure_mode_gets_its_verdicts_and_step(
        pool: ParamikoPool, sims: Callable[[str], SimHost], scenario: str, want: list[str],
        want_step: str) -> None:
    d = health(pool, sims(scenario))
    assert verdicts(d) == want, finding(d, "gpu.verdicts").detail
    assert step(d) == want_step
    assert not no_gpus_said(d)
    # the step is a button where an action takes it (issues 35, 36): the reset (with what it
    # stops around it) for a GPU whose step is a reset and that no process uses, a reboot;
    # never a unit stop or a kill for hardware; a ticket, or a reset while a process still
    # uses the GPU, is a person's step
    buttons = {"gpu_held_no_process": ["gpu.reset"], "gpu_xid79": ["host.reboot"],
               "gpu_nvml_mismatch": ["host.reboot"], "gpu_smi_hang": ["host.reboot"]}
    assert [a.kind for a in d.actions] == buttons.get(scenario, [])
    said = finding(d, "gpu.step").title
    assert ("For a person" in said) == (scenario not in buttons), said
    assert ("Approve below" in said) == (scenario in buttons), said
    if scenario == "gpu_ecc_dbe":  # its job still runs on GPU 5: no reset preflight refuses
        assert "reset GPU 5 (nvidia-smi -r) once no process uses it (now PID" in said, said


def test_lost_gpu_is_named_by_its_bus_and_the_xid(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = health(pool, sims("gpu_xid79"))
    broken = finding(d, "gpu.broken")
    assert broken.title.startswith("GPU 3 (5D:00.0) is broken: ")
    assert "Xid 79 since boot" in broken.title
    rows = finding(d, "gpu.verdicts").evidence["gpus"]
    assert [r["bus"] for r in rows][:4] == ["0000:18:00", "0000:2a:00", "0000:3a:00", "0000:5d:00"]
    assert "Unable to determine the device handle for GPU 0000:5D:00.0: Unknown Error" in \
        finding(d, "gpu.tool_error").title


def test_mismatch_quotes_the_tool_with_both_versions(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = health(pool, sims("gpu_nvml_mismatch"))
    assert finding(d, "gpu.tool_error").title == (
        "driver/library mismatch: driver 580.95.05 loaded, library 580.105.08")


def test_missing_and_ecc_and_hang_say_why(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    missing = health(pool, sims("gpu_missing"))
    assert finding(missing, "gpu.missing").title.startswith("1 of 8 GPUs missing")
    ecc = health(pool, sims("gpu_ecc_dbe"))
    assert "2 uncorrectable ECC error(s)" in finding(ecc, "gpu.broken").title
    assert "Xid 48 since boot: double-bit ECC error" in finding(ecc, "gpu.broken").title
    hang = health(pool, sims("gpu_smi_hang"))
    assert "nvidia-smi timed out after" in finding(hang, "gpu.tool_error").title
    assert finding(hang, "gpu.verdicts").title.startswith(
        "8 GPUs expected: could not read the GPUs (nvidia-smi timed out after ")
    assert hang.status.value == "partial"


@pytest.mark.parametrize("scenario", ["seed", "seed_container"])
def test_seed_story_is_held_idle_not_broken(
        pool: ParamikoPool, sims: Callable[[str], SimHost], scenario: str) -> None:
    d = health(pool, sims(scenario))  # in a container no PID map: /dev/nvidia* users count
    assert verdicts(d) == ["held_idle"] * 8
    assert finding(d, "gpu.held_idle").title.startswith("8 GPUs hold memory")
    assert step(d) is None and d.actions == ()


@pytest.mark.parametrize(("scenario", "why"), [
    ("gpu_nvml_mismatch", "nvidia-smi: Failed to initialize NVML"),
    ("gpu_xid79", "nvidia-smi: Unable to determine the device handle"),
    ("gpu_smi_hang", "nvidia-smi timed out after"),
])
def test_auto_picks_gpu_health_when_nvidia_smi_errs(
        pool: ParamikoPool, sims: Callable[[str], SimHost], scenario: str, why: str) -> None:
    d = run_playbook(pool, sims(scenario).ssh_target(), "auto", options=FAST)
    assert d.playbook == "gpu_health"
    assert finding(d, "playbook.auto").evidence["why"].startswith(why)
    assert not no_gpus_said(d) and [a.kind for a in d.actions] == ["host.reboot"]
