"""Every simulated fault host's headline (issue 29), over a real sshd at playbook level.
``docs/headlines.md`` (the headline beside the settled message after each click, through
``serve``) is written by ``scripts/headlines.py``; the test below checks it names every
fault host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.chat.summary import action_gain, action_phrase
from bot.domain.findings import Diagnosis
from bot.domain.headline import Headline, choose
from bot.remediation.actions import fixes_of
from bot.sim.scenario import load_scenario
from bot.sim.sshd import SimHost
from bot.ssh.pool import ParamikoPool
from playbooks import run_playbook
from tests.helpers.fault_hosts import fault_hosts, options_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "headlines.md"
UNIT = "vllm-kimi-k25-int4.service"
SEED = (f"{UNIT}, auto-started at boot, holds 8 GPUs × 75.8 GiB at 0% since boot (22 min)",
        f"stop {UNIT} and keep it from starting at boot (frees 606.2 GiB)")
# the step a GPU fault's verdict calls for, offered as its action's button (issue 35)
REBOOT = "reboot the host (every process on it stops)"
# fault host -> (headline, first proposed action or "-"), as `incident-bot diagnose` (auto) says
HIDDEN = "vllm-kimi-k25-int4.service (process not visible to this login)"
WANT: dict[str, tuple[str, str]] = {
    "disk_full": ("/ is 100% full: 0 B free of 200.0 GiB",
                  "vacuum the systemd journal down to 500M"),
    "disk_full_checkpoints": ("/data is 99% full: 27.2 GiB free of 3.4 TiB", "-"),
    "disk_full_ml": ("/ is 100% full: 0 B free of 200.0 GiB",
                     "vacuum the systemd journal down to 500M"),
    "fabric_manager_down": ("nvidia-fabricmanager is failed on an NVSwitch host: NVLink "
                            "traffic cannot flow", "-"),
    "gpu_thermal": ("GPU 4 (9A:00.0): clocks slowed by HW thermal slowdown, SW thermal "
                    "slowdown", "-"),
    "gpu_wedged_dcgm_container": ("8 GPUs wedged: 68.5 GiB each held with no process, unit or "
                                  "container using them", "reset every GPU"),
    "ib_flapping": ("InfiniBand mlx5_0 port 1 went down 9 times since its counters were "
                    "cleared (link flapping)", "-"),
    "ib_port_down": ("InfiniBand mlx5_1 port 1 is Down (physical Polling): it was up and went "
                     "down (1 time since its counters were cleared)", "-"),
    "nvlink_errors": ("GPU 2 (3A:00.0): Xid 74, NVLink error", "-"),
    "pcie_downtrained": ("GPU 5 (AB:00.0): PCIe link x8 of x16 (downtrained)", "-"),
    "xid45_storm": ("Xid 45 on GPU 0000:2a:00 (pid 2211, python, train-70b.service): preemptive "
                    "cleanup, due to previous errors — the application's fault, not the GPU's",
                    "-"),
    "gpu_ecc_dbe": ("GPU 5 (AB:00.0): uncorrectable ECC error", "-"),
    "gpu_ecc_vllm": ("GPU 5 (AB:00.0): uncorrectable ECC error", SEED[1]),
    "gpu_held_hidden": (SEED[0].replace(UNIT, HIDDEN, 1), SEED[1]),
    "gpu_held_no_process": ("8 GPUs wedged: 68.5 GiB each held with no process, unit or "
                            "container using them", "reset every GPU"),
    "gpu_missing": ("GPU 7 (DB:00.0) is missing: 7 of 8 visible", "-"),
    "gpu_nvml_mismatch": ("driver/library mismatch: driver 580.95.05 loaded, library 580.105.08",
                          REBOOT),
    "gpu_nvml_denied": ("nvidia-smi was refused: Failed to initialize NVML: Insufficient "
                        "Permissions (the login's permissions, not a GPU fault)", "-"),
    "gpu_smi_hang": ("could not read the GPUs: nvidia-smi timed out after 1.6 s", REBOOT),
    "gpu_xid79": ("GPU 3 (5D:00.0) fell off the bus (Xid 79)", REBOOT),
    "healthy": ("8 GPUs: 8 busy", "-"),
    "hostile": ("gpu-hog-$(touch <workdir>/CANARY).service, auto-started at boot, holds "
                "2 GPUs × 75.2 GiB at 0% since boot (22 min)", "-"),
    "ladder": ("trainer.service, auto-started at boot, holds 2 GPUs × 39.1 GiB at 0% since boot "
               "(22 min)", "stop trainer.service and keep it from starting at boot "
               "(frees 78.1 GiB)"),
    "respawn": (SEED[0], "stop gpu-watchdog.service and keep it from starting at boot"),
    "respawn_10s": SEED,
    "seed": SEED,
    "seed_container": SEED,
    "sudo_refused": SEED,
    "two_holders": SEED,  # the big holder, its own 75.8 GiB; the 2 GiB sweep below it
}


def _first_action(d: Diagnosis) -> str:
    if not d.actions:
        return "-"
    gain = action_gain(d.actions[0], d)
    return action_phrase(d.actions[0], d) + (f" (frees {gain})" if gain else "")


def _row(scenario: str, host: SimHost, d: Diagnosis, h: Headline) -> tuple[str, ...]:
    def plain(text: str) -> str:
        return text.replace(str(host.workdir), "<workdir>")

    return (scenario, load_scenario(scenario).description, plain(h.text), plain(h.context),
            plain(_first_action(d)))


RESULTS: dict[str, tuple[str, ...]] = {}


@pytest.mark.parametrize("scenario", fault_hosts())
def test_fault_host_headline(pool: ParamikoPool, sims: Callable[[str], SimHost],
                             scenario: str) -> None:
    host = sims(scenario)
    d = run_playbook(pool, host.ssh_target(), "auto",
                     options=options_for(scenario, command_timeout_s=1.5))
    row = _row(scenario, host, d, choose(d, fixes_of))
    RESULTS[scenario] = row
    assert (row[2], row[4]) == WANT[scenario], row
    assert "held_idle" not in row[2] and "–" not in row[2].split(" at ")[0][-12:]


def test_docs_headlines_names_every_fault_host() -> None:
    """``scripts/headlines.py`` writes it; a new fault host needs a run of it."""
    rows = [line.split(" | ")[0].strip("| ") for line in DOC.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| ---")]
    assert sorted(rows[1:]) == sorted(fault_hosts()), "rerun scripts/headlines.py"
