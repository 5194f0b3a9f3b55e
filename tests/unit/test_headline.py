"""The headline rule (bot/domain/headline.py), branch by branch: a GPU tool that cannot
answer, a broken or missing GPU, a full filesystem, wedged GPUs, the first fixable
action's finding, the most severe finding; the reboot is context, never the headline."""

from __future__ import annotations

from typing import Any

import pytest

from bot.domain import headline as hl
from bot.domain import holding
from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, ProposedAction, Severity
from bot.remediation.actions import fixes_of

C, W, INFO = Severity.CRITICAL, Severity.WARNING, Severity.INFO


def pick(d: Diagnosis) -> hl.Headline:
    """The headline as the bot chooses it: with the actions' own fix rules."""
    return hl.choose(d, fixes_of)
BOOT = Finding("boot.previous", C, "booted 18.0 h ago; previous boot ended without a clean "
               "shutdown (crash, power loss or a killed VM)")
UNIT = "vllm-kimi-k25-int4.service"


def diag(*findings: Finding, actions: tuple[ProposedAction, ...] = ()) -> Diagnosis:
    return Diagnosis("gpu-01", "vm_restart", DiagnosisStatus.OK, 1.0, findings, actions)


def tool(kind: str, title: str, quote: str = "", bus: str | None = None) -> Finding:
    return Finding("gpu.tool_error", C, title, evidence={"kind": kind, "quote": quote or title,
                                                         "bus": bus})


def gpu(code: str, index: int | None, bus: str, *reasons: str) -> Finding:
    return Finding(code, C, f"GPU {index} is {code}", evidence={"gpu": {
        "index": index, "bus": bus, "reasons": list(reasons)}})


def gpus(n: int, mib: int = 77_600, util: int = 0) -> list[dict[str, Any]]:
    return [{"index": i, "memory_used_mib": mib, "utilization_pct": util} for i in range(n)]


def held(pid: int = 440, unit: str | None = UNIT, after: float = 9.0, elapsed: int = 64_800,
         n: int = 8, used: int = 77_600 * 8) -> Finding:
    holder = {"pid": pid, "unit": unit, "kind": "vLLM", "started_after_boot_s": after,
              "elapsed_s": elapsed, "used_mib": used}
    restarter = {"kind": "systemd", "name": unit} if unit else {"kind": "none"}
    return Finding("gpu.idle_vram_held", C, "8 GPUs hold …", evidence={
        "gpus": gpus(n), "holders": [holder], "restarter": restarter})


def full(mount: str, pct: float, severity: Severity = C, alerted: bool = False) -> Finding:
    return Finding("disk.full", severity, f"{mount} is {pct:.0f}% full",
                   evidence={"filesystem": {"mount": mount, "used_pct": pct},
                             "alerted": alerted})


def act(kind: str, **params: str) -> ProposedAction:
    return ProposedAction(kind[:6], kind, params, "r")


STOP = act("systemd.stop_disable", unit=UNIT)


def test_a_hanging_tool_heads_and_covers_the_gpus_it_left_unread() -> None:
    hang = tool("hung", "nvidia-smi timed out after 10.1 s")
    unread = Finding("gpu.verdicts", C, "8 GPUs expected: could not read the GPUs (nvidia-smi "
                     "timed out after 10.1 s)", evidence={"unread": "hung"})
    h = pick(diag(hang, unread, BOOT, held(), actions=(STOP,)))
    assert h.text == "could not read the GPUs: nvidia-smi timed out after 10.1 s"
    assert h.covers == (0, 1)
    assert h.context.startswith("Booted 18.0 h ago; previous boot ended without")


def test_driver_library_mismatch_is_its_own_headline() -> None:
    title = "driver/library mismatch: driver 580.95.05 loaded, library 580.105.08"
    h = pick(diag(BOOT, tool("nvml_mismatch", title), gpu("gpu.broken", 0, "", "x")))
    assert h.text == title and h.finding == 1


def test_no_driver_quotes_the_tool_and_unknown_failures_keep_their_title() -> None:
    quote = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    assert pick(diag(tool("no_driver", "x", quote))).text == \
        f"the NVIDIA driver does not answer: {quote}"
    assert pick(diag(tool("failed", "nvidia-smi exited with status 9: boom"))).text == \
        "nvidia-smi exited with status 9: boom"


def test_a_per_device_tool_error_is_not_host_wide() -> None:
    handle = tool("device_handle", "nvidia-smi: Unable to determine the device handle",
                  bus="0000:5d:00")
    lost = gpu("gpu.broken", 3, "0000:5d:00", "Unable to determine the device handle …",
               "Xid 79 since boot: GPU has fallen off the bus")
    h = pick(diag(handle, lost))
    assert h.text == "GPU 3 (5D:00.0) fell off the bus (Xid 79)"
    assert set(h.covers) == {0, 1}  # the tool's line is the same fault: not "also found"


@pytest.mark.parametrize(("reasons", "text"), [
    (["GPU has fallen off the bus"], "GPU 2 (3A:00.0) fell off the bus (Xid 79)"),
    (["2 uncorrectable ECC error(s) since driver load", "Xid 48 since boot: double-bit ECC"],
     "GPU 2 (3A:00.0): uncorrectable ECC error"),
    (["Xid 119 since boot: GSP RPC timeout"], "GPU 2 (3A:00.0): Xid 119, GSP RPC timeout"),
    (["Unable to determine the device handle for GPU 0000:3A:00.0: Unknown Error"],
     "GPU 2 (3A:00.0) cannot be opened: Unable to determine the device handle for GPU "
     "0000:3A:00.0: Unknown Error"),
    (["row remapping failed"], "GPU 2 (3A:00.0) is broken: row remapping failed"),
    ([], "GPU 2 (3A:00.0) is broken: ?"),
])
def test_broken_gpu_words(reasons: list[str], text: str) -> None:
    assert pick(diag(BOOT, held(), gpu("gpu.broken", 2, "0000:3a:00", *reasons),
                          actions=(STOP,))).text == text


def test_broken_without_gpu_evidence_keeps_its_title() -> None:
    assert pick(diag(Finding("gpu.broken", C, "GPU 0 is broken"))).text == "GPU 0 is broken"


@pytest.mark.parametrize(("evidence", "text"), [
    ({"expected": 8, "seen": 7, "gpus": [{"index": 7, "bus": "0000:db:00"}]},
     "GPU 7 (DB:00.0) is missing: 7 of 8 visible"),
    ({"expected": 8, "seen": 7, "gpus": []}, "1 GPU missing: 7 of 8 visible"),
    ({"expected": 8, "seen": 6}, "2 GPUs missing: 6 of 8 visible"),
])
def test_missing_gpus(evidence: dict[str, Any], text: str) -> None:
    assert pick(diag(Finding("gpu.missing", C, "x", evidence=evidence))).text == text


def test_a_full_filesystem_comes_before_wedged_gpus_and_actions() -> None:
    d = diag(gpu("gpu.wedged", 0, "", "process 1312 in D state (uninterruptible)"),
             full("/", 99.0), full("/data", 100.0), full("/scratch", 100.0), held(),
             actions=(STOP,))
    assert pick(d).text == "/data is 100% full" and pick(d).finding == 2


def test_the_alerted_filesystem_is_named_before_a_fuller_one() -> None:
    d = diag(full("/", 99.5), full("/data", 98.2, alerted=True), held(), actions=(STOP,))
    assert pick(d).text == "/data is 98% full" and pick(d).finding == 1


def test_an_alerted_filesystem_below_critical_gives_way_to_a_critical_one() -> None:
    d = diag(full("/", 99.5), full("/data", 95.0, W, alerted=True), held(), actions=(STOP,))
    assert pick(d).text == "/ is 100% full"


def test_a_nearly_full_filesystem_is_not_a_blocker() -> None:
    d = diag(full("/data", 91.0, W), held(), actions=(STOP,))
    assert pick(d).text.startswith(f"{UNIT}, auto-started at boot")


def test_wedged_gpus_with_no_process_are_counted() -> None:
    rows = [gpu("gpu.wedged", i, "", "memory held and no live process uses this GPU")
            for i in range(8)]
    for row in rows:
        row.evidence["gpu"]["memory_used_mib"] = 70_120
    h = pick(diag(*rows, held(unit=None)))
    assert h.text == ("8 GPUs wedged: 68.5 GiB each held with no process, unit or container "
                      "using them") and h.covers == tuple(range(8))
    one = pick(diag(gpu("gpu.wedged", 4, "", "process 9 in D state (uninterruptible)")))
    assert one.text == "1 GPU wedged: process 9 in D state (uninterruptible)"


def test_the_first_action_names_its_finding_and_the_reboot_is_context() -> None:
    h = pick(diag(BOOT, held(), actions=(STOP,)))
    assert h.text == (f"{UNIT}, auto-started at boot, holds 8 GPUs × 75.8 GiB at 0% "
                      "since boot (18 h)")
    assert h.finding == 1 and h.context.startswith("Booted 18.0 h ago")


def test_a_watchdog_stop_names_nothing_so_the_next_action_does() -> None:
    watchdog = act("systemd.stop_disable", unit="gpu-watchdog.service")
    h = pick(diag(held(), actions=(watchdog, STOP)))
    assert h.text.startswith(UNIT)


def test_a_process_started_later_holds_for_its_own_run_time() -> None:
    f = held(pid=3391, unit=None, after=7200.0, elapsed=600, n=1, used=2048)
    terminate = act("process.terminate", pid="3391")
    assert pick(diag(f, actions=(terminate,))).text == \
        "PID 3391 (vLLM) holds 1 GPU × 75.8 GiB at 0% for 10 min"


def test_held_with_no_holder_named() -> None:
    f = Finding("gpu.idle_vram_held", C, "x", evidence={"gpus": gpus(2)})
    assert pick(diag(f)).text == \
        "2 GPUs × 75.8 GiB held at 0% by a process that could not be named"


@pytest.mark.parametrize(("action", "mount", "fixed"), [
    (act("disk.journal_vacuum", size="500M"), "/", True),
    (act("disk.journal_vacuum", size="500M"), "/data", False),
    (act("disk.cleanup", paths="/data/ckpt/a,/data/ckpt/b"), "/data", True),
    (act("disk.cleanup", paths="/database/x"), "/data", False),
    (act("host.reboot", host="gpu-01"), "/", False),
])
def test_which_disk_finding_an_action_fixes(action: ProposedAction, mount: str,
                                            fixed: bool) -> None:
    f = full(mount, 93.0, W)
    assert (hl.fixed_by(action, [(0, f)], fixes_of(action.kind)) is not None) is fixed


def test_else_the_most_severe_finding_never_the_auto_note_or_the_boot() -> None:
    auto = Finding("playbook.auto", INFO, "auto chose triage")
    d = diag(auto, BOOT, Finding("host.memory", W, "memory low\nsecond line"),
             Finding("gpu.verdicts", INFO, "8 GPUs: 8 busy"))
    h = pick(d)
    assert h.text == "memory low" and h.finding == 2
    assert pick(diag(auto, Finding("gpu.verdicts", INFO, "8 GPUs: 8 busy"))).text == \
        "8 GPUs: 8 busy"
    assert pick(diag(auto, BOOT)).text == "nothing wrong found"
    assert pick(diag()).text == "nothing wrong found" and pick(diag()).context == ""


@pytest.mark.parametrize(("bus", "label"), [
    ("0000:3a:00", "3A:00.0"), ("00000000:DB:00.0", "DB:00.0"), ("", ""), ("junk", "")])
def test_bus_label(bus: str, label: str) -> None:
    assert hl.bus_label(bus) == label


def test_amounts_never_show_an_equal_range_and_agree_in_number() -> None:
    assert holding.gpu_amount([{"memory_used_mib": 77_600}, {"memory_used_mib": 77_610}]) == \
        "2 GPUs × 75.8 GiB"
    assert holding.gpu_amount([{"memory_used_mib": 40_000}, {"memory_used_mib": 77_600}]) == \
        "2 GPUs, 39.1–75.8 GiB"
    assert holding.gpu_amount([{"memory_used_mib": 1024}]) == "1 GPU × 1.0 GiB"
    assert holding.utilisation([{"utilization_pct": 0.2}, {"utilization_pct": 0}]) == "0%"
    assert holding.utilisation([{"utilization_pct": 2}, {"utilization_pct": 5}]) == "2–5%"
    assert holding.utilisation([{}]) == "unknown utilisation"


@pytest.mark.parametrize(("holder", "text"), [
    ({"elapsed_s": 64_800, "started_after_boot_s": 9}, "since boot (18 h)"),
    ({"elapsed_s": 600, "started_after_boot_s": 7200}, "for 10 min"),
    ({"elapsed_s": 600}, "for 10 min"),
    ({"started_after_boot_s": 9}, ""),
])
def test_held_for_is_the_holders_run_time(holder: dict[str, Any], text: str) -> None:
    assert holding.held_for(holder) == text


def test_the_evidence_hash_ignores_how_long_memory_has_been_held() -> None:
    """An approval's evidence hash must not change because a minute passed."""
    from bot.domain.evidence import evidence_hash

    early = pick(diag(held(elapsed=600, after=7200.0), actions=(STOP,)))
    assert early.since == "for 10 min" and early.stable_text == \
        f"{UNIT} holds 8 GPUs × 75.8 GiB at 0%"
    assert evidence_hash(diag(held(elapsed=600), actions=(STOP,))) == \
        evidence_hash(diag(held(elapsed=4000), actions=(STOP,)))
    assert evidence_hash(diag(held(elapsed=600), actions=(STOP,))) != \
        evidence_hash(diag(held(elapsed=600, n=2), actions=(STOP,)))


def test_held_for_falls_back_to_the_units_active_time() -> None:
    """A PID ps cannot time (another namespace): the unit's ActiveEnterTimestampMonotonic."""
    assert holding.held_for({"unit_active_after_boot_s": 9.0, "uptime_s": 64_809.0}) == \
        "since boot (18 h)"
    assert holding.held_for({"unit_active_after_boot_s": 3600.0, "uptime_s": 4200.0}) == \
        "for 10 min"
    assert holding.held_for({"unit_active_after_boot_s": 3600.0}) == ""


def test_the_disk_playbook_marks_the_filesystem_the_alert_named() -> None:
    from playbooks import disk_full
    from playbooks.base import PlaybookOptions, Report
    from playbooks.parsers.disk import Filesystem

    space = [Filesystem("/dev/sda1", "ext4", 100, 99, 1, "/"),
             Filesystem("/dev/sdb1", "xfs", 1000, 985, 15, "/data")]
    report = Report("gpu-01")
    disk_full.assess_space(space, [], PlaybookOptions(), report, alerted="/data")
    found = [f for f in report.findings if f.code == "disk.full"]
    assert {f.evidence["filesystem"]["mount"]: f.evidence["alerted"] for f in found} == {
        "/": False, "/data": True}
    assert pick(diag(*found)).text.startswith("/data is 98")
