"""A read the host refused, or a GPU tool that could not answer, over a real sshd: its own
finding in the tool's words, never a GPU verdict, never an invented count (issue 35)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from bot.domain.findings import Diagnosis, Finding
from bot.domain.headline import choose
from bot.remediation.actions import fixes_of
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from playbooks import PlaybookOptions, run_playbook

FAST = PlaybookOptions(samples=2, sample_interval_s=0.1, command_timeout_s=2.0)


def codes(d: Diagnosis, code: str) -> list[Finding]:
    return [f for f in d.findings if f.code == code]


def test_a_refused_sudo_is_said_in_sudos_words_and_probes_never_ask_for_it(
        pool: ParamikoPool, sim_factory: Callable[..., SimHost]) -> None:
    """A non-root login (``sudo: true``) on a host whose sudoers have no rule for it: only
    the journal's size asks sudo (a non-root user cannot size it); that refusal is a
    finding in sudo's words; every other probe ran as the login and the GPUs read."""
    host = sim_factory("disk_full", overrides={"sudo_refuses": True})
    d = run_playbook(pool, replace(host.ssh_target(), sudo=True), "disk_full", options=FAST)
    (refused,) = codes(d, "probe.refused")
    assert refused.title == "could not read the journal's size: sudo: a password is required"
    assert refused.evidence["kind"] == "sudo"
    sent = [str(e.get("command", "")) for e in host.command_log() if e.get("command")]
    assert [c for c in sent if c.startswith("sudo")] == []  # no probe is wrapped in sudo
    assert [c for c in sent if "sudo -n" in c] == [
        "timeout -k 2 2 sh -c 'sudo -n journalctl --disk-usage'"]
    assert "broken" not in codes(d, "gpu.verdicts")[0].title
    assert not any(f.code == "disk.journal" for f in d.findings)  # no size: nothing claimed


def test_a_hung_nvidia_smi_without_an_inventory_count_invents_none(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = run_playbook(pool, sims("gpu_smi_hang").ssh_target(), "gpu_health", options=FAST)
    (verdicts,) = codes(d, "gpu.verdicts")
    assert verdicts.title.startswith(
        "GPU count unknown: could not read the GPUs (nvidia-smi timed out after ")
    assert verdicts.evidence["gpus"] == [] and verdicts.evidence["counts"] == {}
    assert not codes(d, "gpu.wedged") and not codes(d, "gpu.broken")
    assert choose(d, fixes_of).text.startswith(
        "could not read the GPUs: nvidia-smi timed out after ")


def test_nvml_refused_to_the_login_is_not_a_gpu_fault(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = run_playbook(pool, sims("gpu_nvml_denied").ssh_target(), "auto",
                     options=replace(FAST, expected_gpus=8))
    assert d.playbook == "triage"  # a refusal does not pick gpu_health: the GPUs are not at fault
    (tool,) = codes(d, "gpu.tool_error")
    assert tool.evidence["kind"] == "denied" and tool.severity.value == "warning"
    assert "Failed to initialize NVML: Insufficient Permissions" in tool.title
    assert [g["verdict"] for g in codes(d, "gpu.verdicts")[0].evidence["gpus"]] == \
        ["unknown"] * 8
    assert not any(f.code == "gpu.step" for f in d.findings)  # no reboot for a permission
