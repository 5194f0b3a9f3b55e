"""One diagnosis pipeline (issue 29): whatever the playbook, the same per-GPU verdicts
on every simulated fault host, over a real sshd; the kind adds probes, never removes the
GPU view, and the GPU tool's own words reach every playbook's result."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.domain.findings import Diagnosis
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from playbooks import run_playbook
from tests.helpers.fault_hosts import fault_hosts, options_for

PLAYBOOKS = ("vm_restart", "vram_idle", "auto", "disk_full", "triage")


def verdicts(d: Diagnosis) -> list[tuple[int | None, str]]:
    view = next(f for f in d.findings if f.code == "gpu.verdicts")
    return [(g["index"], g["verdict"]) for g in view.evidence["gpus"]]


def tool_errors(d: Diagnosis) -> list[str]:
    return sorted(f.title for f in d.findings if f.code == "gpu.tool_error")


@pytest.mark.parametrize("scenario", [s for s in fault_hosts() if s != "gpu_smi_hang"])
def test_every_playbook_gives_the_same_per_gpu_verdicts(
        pool: ParamikoPool, sims: Callable[[str], SimHost], scenario: str) -> None:
    host = sims(scenario)
    got = {name: run_playbook(pool, host.ssh_target(), name, options=options_for(scenario))
           for name in PLAYBOOKS}
    first = verdicts(got["vm_restart"])
    assert first, "no GPU rows at all"
    for name, d in got.items():
        assert verdicts(d) == first, (name, d.findings)
        assert tool_errors(d) == tool_errors(got["vm_restart"]), name
        assert not any(f.code == "gpu.no_data" for f in d.findings if tool_errors(d)), name


def test_a_hanging_nvidia_smi_is_named_in_every_playbook(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    host = sims("gpu_smi_hang")
    opts = options_for("gpu_smi_hang", command_timeout_s=1.5)
    for name in ("vm_restart", "vram_idle", "auto"):
        d = run_playbook(pool, host.ssh_target(), name, options=opts)
        titles = [f.title for f in d.findings]
        assert "nvidia-smi timed out after 1.6 s" in titles, (name, titles)
        assert not any("no readable GPU rows" in t for t in titles), name
        assert {v for _, v in verdicts(d)} == {"unknown"}, name  # not read, never wedged


def test_mismatch_is_its_own_finding_with_both_versions_in_vm_restart(
        pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = run_playbook(pool, sims("gpu_nvml_mismatch").ssh_target(), "vm_restart",
                     options=options_for("gpu_nvml_mismatch"))
    titles = [f.title for f in d.findings]
    assert "driver/library mismatch: driver 580.95.05 loaded, library 580.105.08" in titles
    assert not any("no readable GPU rows" in t for t in titles)


def test_shared_probes_run_once(pool: ParamikoPool, sims: Callable[[str], SimHost]) -> None:
    d = run_playbook(pool, sims("seed").ssh_target(), "vram_idle", options=options_for("seed"))
    names = [p.name for p in d.probes]
    assert names.count("gpus") == 1 and names.count("gpu_processes") == 1, names
    assert {"gpu_xml", "kernel_log"} <= set(names)
