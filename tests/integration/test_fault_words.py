"""What the on-call reads first, through a real ``serve``, on the fault hosts of issue 35:
the holder that matters, a holder no process of which is visible, a hung or refused or
mismatched nvidia-smi, a host whose sudo refuses the login, and a cleanup that must
reach what the disk needs. One serve, one sim host per fault, each alerted as its rule
would alert it; every assertion is on the message Slack holds (the stand-in).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.domain.lifecycle import IncidentState
from tests.helpers.fault_serve import FaultServe, fault_serve, host_name
from tests.helpers.serve_process import wait_until

UNIT = "vllm-kimi-k25-int4.service"
SEED = f"{UNIT}, auto-started at boot, holds 8 GPUs × 75.8 GiB at 0% since boot"
STOP = f"Stop {UNIT} and keep it from starting at boot (frees 606.2 GiB)"
FAULTS = ["two_holders", "gpu_held_hidden", "gpu_held_no_process", "sudo_refused",
          "gpu_nvml_denied", "gpu_nvml_mismatch", "gpu_smi_hang", "disk_full_checkpoints"]
INVENTED = re.compile(r"\bGPU \?|\b1 GPU: 1 wedged|\bno GPUs?\b")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServe]:
    with fault_serve(tmp_path_factory.mktemp("fault-words"), FAULTS,
                     host_fields={"sudo_refused": {"sudo": True}}) as served:
        for name in FAULTS:
            served.alert(name, **({"mountpoint": "/data"} if name.startswith("disk") else {}))
        yield served


def first(rig: FaultServe, scenario: str) -> tuple[str, str]:
    incident = rig.first(scenario)
    return rig.headline(incident), rig.text(incident)


def test_the_big_holder_heads_and_the_small_one_is_listed_in_its_own_memory(
        rig: FaultServe) -> None:
    head, text = first(rig, "two_holders")
    assert head.startswith(SEED), head
    assert "77.8" not in text  # GPU 0's two holders are never one holder's amount
    assert ("1 GPU holds 2.0 GiB at 0% for 13 min: PID 3391 (python3 sweep.py --lr 3e-4, "
            "user ubuntu)") in text
    proposals = [ln for ln in text.splitlines() if ln.startswith("*Proposed:*")]
    assert proposals[0].startswith(f"*Proposed:* {STOP}")
    assert proposals[1].startswith("*Proposed:* End PID 3391 (frees 2.0 GiB)")


def test_a_holder_in_a_hidden_pid_namespace_is_named_by_its_unit(rig: FaultServe) -> None:
    head, text = first(rig, "gpu_held_hidden")
    assert head.startswith(f"{UNIT} (process not visible to this login), auto-started at "
                           "boot, holds 8 GPUs × 75.8 GiB at 0% since boot"), head
    assert "wedged" not in text and "no process" not in text  # the body and head agree
    assert f"*Proposed:* {STOP}" in text


def test_memory_held_with_nothing_holding_it_is_wedged_with_its_amount(
        rig: FaultServe) -> None:
    head, text = first(rig, "gpu_held_no_process")
    assert head == ("8 GPUs wedged: 68.5 GiB each held with no process, unit or container "
                    "using them")
    assert "GPU 1 (" not in text and text.count("no live process") <= 1  # said once


def test_a_sudo_that_refuses_the_login_is_no_gpu_fault(rig: FaultServe) -> None:
    """``sudo: true`` and a sudoers without a rule for the login: the probes never go
    through sudo, so the diagnosis is the seed's; the action's own `sudo -n` is refused
    at the click, in sudo's words, and nothing runs."""
    incident = rig.first("sudo_refused")
    head, text = rig.headline(incident), rig.text(incident)
    assert head.startswith(SEED) and "broken" not in text
    log = rig.sims["sudo_refused"].command_log()
    assert not [e for e in log if str(e.get("command", "")).startswith("sudo")]
    rig.click(incident)
    assert wait_until(lambda: rig.store.require(incident.id).state in (
        IncidentState.ACTION_FAILED, IncidentState.AWAITING_APPROVAL) and
        "a password is required" in rig.text(incident), 60), rig.text(incident)
    ran = [e for e in rig.sims["sudo_refused"].command_log()
           if e.get("tool") == "systemctl" and e.get("argv", [""])[0] in ("stop", "disable")]
    assert ran == []


@pytest.mark.parametrize(("scenario", "headline", "why"), [
    ("gpu_nvml_denied", "nvidia-smi was refused: Failed to initialize NVML: Insufficient "
     "Permissions (the login's permissions, not a GPU fault)",
     "(nvidia-smi: Failed to initialize NVML: Insufficient Permissions)"),
    ("gpu_nvml_mismatch", "driver/library mismatch: driver 580.95.05 loaded, library "
     "580.105.08", "(nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"),
    ("gpu_smi_hang", "could not read the GPUs: nvidia-smi timed out after ",
     "(nvidia-smi timed out after "),
])
def test_an_unread_gpu_is_never_broken_nor_invented(rig: FaultServe, scenario: str,
                                                    headline: str, why: str) -> None:
    """The count is the inventory's (8), the verdict "could not read the GPUs" in the
    tool's words; never "8 broken", never "1 GPU: 1 wedged; GPU ?"."""
    incident = rig.first(scenario)
    head, text = rig.headline(incident), rig.text(incident)
    assert head.startswith(headline), head
    assert wait_until(lambda: bool(rig.thread(incident)), 30)
    thread = "\n".join(rig.thread(incident))
    assert f"8 GPUs expected: could not read the GPUs {why}" in thread, thread
    for said in (text, thread):
        assert "broken" not in said and "wedged" not in said
        assert not INVENTED.search(said), said


def test_a_cleanup_reaches_what_the_disk_needs_and_says_what_it_keeps(
        rig: FaultServe) -> None:
    head, text = first(rig, "disk_full_checkpoints")
    assert head == "/data is 99% full: 27.2 GiB free of 3.4 TiB"
    assert ("*Proposed:* Delete 2 items (1 HF cache, 1 checkpoint), freeing 333.0 GiB of the "
            "321.0 GiB needed; keeps the newest 2 checkpoints of each run (llama-sft: "
            "checkpoint-4500, checkpoint-4000)") in text
    assert "HF cache meta-llama--Llama-3.1-70B-I… · 263.0 GiB" in text
    assert "checkpoint checkpoint-500 · 70.0 GiB" in text  # the oldest of equal ones
    assert "MiB" not in text and " TB" not in text


def test_one_unit_family_in_the_thread_too(rig: FaultServe) -> None:
    for scenario in ("two_holders", "disk_full_checkpoints"):
        incident = rig.first(scenario)
        assert wait_until(lambda i=incident: bool(rig.thread(i)), 30)
        assert not [t for t in rig.thread(incident) if "MiB" in t], scenario


def test_every_fault_host_has_its_own_message(rig: FaultServe) -> None:
    for name in FAULTS:
        assert rig.first(name).host == host_name(name)
    assert len(rig.standin.top_level("C0FAULTS")) == len(FAULTS)


def test_a_cleanup_that_cannot_reach_the_need_says_by_how_much(
        tmp_path: Path) -> None:
    """The same disk with only /data/tmp allowed: the 31.0 GiB core dump is all that may
    go; the plan says it stays 290.0 GiB short, before anyone approves it."""
    with fault_serve(tmp_path, ["disk_full_checkpoints"], host_fields={
            "disk_full_checkpoints": {"allowed_path_prefixes": ["/data/tmp"]}}) as served:
        served.alert("disk_full_checkpoints", mountpoint="/data")
        text = served.text(served.first("disk_full_checkpoints"))
    assert ("Delete 1 item (1 core dump), freeing 31.0 GiB of the 321.0 GiB needed (290.0 GiB "
            "short: the disk stays full)") in text
    assert ("a cleanup cannot free enough on /data: what may go under /data/tmp holds 31.0 "
            "GiB, /data needs 321.0 GiB (290.0 GiB short)") in text
