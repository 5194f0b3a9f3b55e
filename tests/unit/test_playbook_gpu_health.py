"""Verdict rules and the Xid policy table, pure (no host)."""

from __future__ import annotations

import pytest

from bot.core.errors import ConfigError
from bot.domain.xid import DEFAULT_POLICY, Fault, XidStep, xid_policy_from_extra
from playbooks.gpu import GpuStat
from playbooks.parsers.kernel import KernelReport, parse_kernel_log
from playbooks.parsers.nvidia_xml import GpuHealth
from playbooks.parsers.smi_errors import SmiError, SmiErrorKind
from playbooks.verdict import GpuVerdict, HealthFacts, decide, grid, worst_step

V = GpuVerdict
NONE = KernelReport([], [], [])


def stat(i: int, mem: int = 70000, util: int = 0) -> GpuStat:
    return GpuStat(i, f"GPU-{i}", "H100", mem, 81559, util, 3)


def xml(i: int, **kw: object) -> GpuHealth:
    return GpuHealth(f"0000:{0x18 + i:02x}:00", f"00000000:{0x18 + i:02X}:00.0", f"GPU-{i}",
                     "H100", "Enabled", **kw)  # type: ignore[arg-type]


def facts(stats: list[GpuStat], health: list[GpuHealth] | None = None,
          kernel: KernelReport = NONE, **kw: object) -> HealthFacts:
    base: dict[str, object] = {"holders": {}, "stuck": {}, "device_users": [], "smi": []}
    base.update(kw)
    return HealthFacts(stats, health if health is not None else [xml(s.index) for s in stats],
                       kernel, **base)  # type: ignore[arg-type]


def test_use_verdicts_busy_free_held_idle_and_wedged() -> None:
    views = decide(facts([stat(0, util=90), stat(1, mem=3), stat(2), stat(3)],
                         holders={"GPU-0": [7], "GPU-2": [8]}))
    assert [v.verdict for v in views] == [V.BUSY, V.FREE, V.HELD_IDLE, V.WEDGED]
    assert views[3].step is XidStep.RESET_GPU and "no live process" in views[3].reasons[0]


def test_an_unseen_holder_is_held_not_wedged() -> None:
    """No process uses any GPU, an active unit runs a GPU server: its PIDs are in a
    namespace this login cannot see (held). A visible holder elsewhere: no such excuse."""
    unseen = decide(facts([stat(0), stat(1)], servers=("vllm-kimi.service",)))
    assert [v.verdict for v in unseen] == [V.HELD_IDLE, V.HELD_IDLE]
    seen = decide(facts([stat(0), stat(1)], holders={"GPU-0": [7]}, servers=("vllm.service",)))
    assert [v.verdict for v in seen] == [V.HELD_IDLE, V.WEDGED]
    traced = decide(facts([stat(0)], named=frozenset({"GPU-0"})))
    assert [v.verdict for v in traced] == [V.HELD_IDLE]


def test_process_in_d_state_wedges_its_gpu_and_asks_for_a_reboot() -> None:
    (v,) = decide(facts([stat(0, util=50)], holders={"GPU-0": [9]}, stuck={"GPU-0": [9]}))
    assert (v.verdict, v.step) == (V.WEDGED, XidStep.REBOOT) and "D state" in v.reasons[0]


def test_hardware_fields_break_or_degrade() -> None:
    health = [xml(0, remap_failure=True), xml(1, slowdowns=("hw_slowdown",)),
              xml(2, retired_sbe=3), xml(3, replays=500), xml(4, replays=5)]
    views = decide(facts([stat(i, util=90) for i in range(5)], health,
                         holders={f"GPU-{i}": [1] for i in range(5)}))
    assert [v.verdict for v in views] == [V.BROKEN, V.DEGRADED, V.DEGRADED, V.DEGRADED, V.BUSY]
    assert views[0].step is XidStep.DRAIN_AND_TICKET
    assert worst_step(views) is XidStep.DRAIN_AND_TICKET


def test_application_xid_does_not_break_the_gpu_but_critical_xid_does() -> None:
    kernel = parse_kernel_log("NVRM: Xid (PCI:0000:18:00): 13, pid=5, name=py, Graphics\n"
                              "NVRM: Xid (PCI:0000:19:00): 95, pid=6, name=py, Uncontained\n")
    views = decide(facts([stat(0, util=90), stat(1, util=90)], kernel=kernel,
                         holders={"GPU-0": [5], "GPU-1": [6]}))
    assert [v.verdict for v in views] == [V.BUSY, V.BROKEN]
    assert views[1].reasons == ["Xid 95 since boot: uncontained ECC error"]


def test_host_wide_error_and_missing_rows_use_the_inventory_count() -> None:
    err = SmiError(SmiErrorKind.NVML_MISMATCH, "Failed to initialize NVML: ...")
    views = decide(facts([], [], smi=[err], expected=4))
    # nothing was read: the inventory's count, each unknown (a mismatch breaks no GPU)
    assert [v.verdict for v in views] == [V.UNKNOWN] * 4 and views[0].step is XidStep.REBOOT
    assert [v.index for v in views] == [0, 1, 2, 3] and views[0].reasons == [err.quote]
    short = decide(facts([stat(0, util=90)], holders={"GPU-0": [1]}, expected=2))
    assert [v.verdict for v in short] == [V.BUSY, V.BROKEN]
    assert short[1].reasons[0].startswith("missing: the inventory expects 2")
    text = grid(short)
    assert text.splitlines()[0].startswith("GPU bus") and "missing" in text.splitlines()[2]


@pytest.mark.parametrize("kind", [SmiErrorKind.HUNG, SmiErrorKind.NVML_MISMATCH,
                                  SmiErrorKind.NO_DRIVER, SmiErrorKind.DENIED,
                                  SmiErrorKind.MISSING, SmiErrorKind.FAILED])
def test_an_unread_host_invents_no_gpu(kind: SmiErrorKind) -> None:
    """No count in the inventory and no row read: no row at all (never "1 GPU: GPU ?"),
    and no GPU is called broken or wedged."""
    err = SmiError(kind, "the tool's words")
    assert decide(facts([], [], smi=[err])) == []
    eight = decide(facts([], [], smi=[err], expected=8))
    assert {v.verdict for v in eight} == {V.UNKNOWN} and len(eight) == 8


def test_a_refusal_asks_for_no_gpu_step_and_a_hang_reads_no_row_it_saw() -> None:
    denied = decide(facts([], [], smi=[SmiError(SmiErrorKind.DENIED, "x")], expected=2))
    assert worst_step(denied) is None
    hung = decide(facts([stat(0, util=90)], smi=[SmiError(SmiErrorKind.HUNG, "t")], expected=2))
    assert [v.verdict for v in hung] == [V.UNKNOWN] * 2


def test_no_devices_on_a_host_that_should_have_gpus_is_every_gpu_missing() -> None:
    err = SmiError(SmiErrorKind.NO_DEVICES, "No devices were found")
    views = decide(facts([], [], smi=[err], expected=2))
    assert [v.verdict for v in views] == [V.BROKEN] * 2
    assert views[0].reasons[0].startswith("missing: the inventory expects 2")
    assert decide(facts([], [], smi=[err])) == []


def test_policy_defaults_follow_the_catalogue() -> None:
    assert DEFAULT_POLICY.rule(79).breaks_gpu and DEFAULT_POLICY.rule(79).step is XidStep.REBOOT
    for xid in (13, 31, 43, 45, 68):
        assert DEFAULT_POLICY.rule(xid).fault is Fault.APP
    assert {48, 64, 74, 79, 95, 119, 120} <= set(DEFAULT_POLICY.critical_gpu_xids())
    unknown = DEFAULT_POLICY.rule(9999)
    assert (unknown.fault, unknown.step) == (Fault.UNKNOWN, XidStep.INVESTIGATE)


def test_policy_config_overrides_and_rejects_typos() -> None:
    policy = xid_policy_from_extra({"xid_policy": {"xids": {
        94: {"severity": "critical", "step": "drain_and_ticket"}, "200": {"fault": "gpu"}}}})
    assert policy.rule(94).breaks_gpu and policy.rule(94).step is XidStep.DRAIN_AND_TICKET
    assert policy.rule(200).fault is Fault.GPU and policy.rule(13).fault is Fault.APP
    bad = [{"xid_policy": {"rules": {}}}, {"xid_policy": {"xids": {"x": {}}}},
           {"xid_policy": {"xids": {79: {"severity": "fatal"}}}},
           {"xid_policy": {"xids": {79: {"step": "pray"}}}},
           {"xid_policy": {"xids": {79: {"colour": "red"}}}}]
    for extra in bad:
        with pytest.raises(ConfigError, match=r"extra\.xid_policy"):
            xid_policy_from_extra(extra)


def test_app_fault_names_the_unit_and_fabric_manager_down_on_nvswitch() -> None:
    from playbooks import gpu_health
    from playbooks.base import Report

    kernel = parse_kernel_log("NVRM: Xid (PCI:0000:18:00): 13, pid=2211, name=python, SM\n"
                              "NVRM: Xid (PCI:0000:18:00): 777, pid=2211, name=python, ?\n")
    f = facts([stat(0, util=90)], [xml(0, fabric_state="Completed")], kernel=kernel,
              holders={"GPU-0": [2211]})
    report = Report("h")
    gpu_health.assess(f, decide(f), {"units": {2211: "train-70b.service"},
                                     "fabric": "inactive"}, report)
    app = next(x for x in report.findings if x.code == "gpu.app_fault")
    assert "(pid 2211, python, train-70b.service)" in app.title
    assert app.evidence["step"] == "restart_app"
    fabric = next(x for x in report.findings if x.code == "gpu.fabric_manager")
    assert fabric.title.startswith("nvidia-fabricmanager is inactive on an NVSwitch host")
    unknown = next(x for x in report.findings if x.code == "gpu.xid_unknown")
    assert unknown.title.startswith("Xid 777 on GPU 0000:18:00 is not in the Xid policy table")
    assert report.actions == []
