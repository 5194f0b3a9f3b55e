"""Fabric and platform verdicts (playbooks/platform.py) and their headlines, pure."""

from __future__ import annotations

from bot.domain.findings import Diagnosis, DiagnosisStatus, Finding, Severity
from bot.domain.headline import Headline, choose
from bot.remediation.actions import fixes_of
from playbooks.base import PlaybookOptions, Report
from playbooks.parsers.infiniband import IbPort
from playbooks.parsers.nvidia_xml import GpuHealth
from playbooks.parsers.nvlink import NvlinkErrors
from playbooks.parsers.pcie import PcieLink
from playbooks.platform import Platform, assess, gpu_issues, mark, port_issues
from playbooks.verdict import GpuVerdict, GpuView

OPTS = PlaybookOptions()


def views() -> list[GpuView]:
    return [GpuView(i, f"0000:{b}:00", f"GPU-{i}", util_pct=97, verdict=GpuVerdict.BUSY)
            for i, b in enumerate(("18", "2a", "3a"))]


def test_each_gpu_fault_is_its_own_issue_and_marks_the_grid() -> None:
    plat = Platform(
        pcie=(PcieLink(0, "00000000:18:00.0", 5, 5, 16, 16, 71, 97),
              PcieLink(1, "00000000:2A:00.0", 5, 5, 8, 16, 88, 97),
              PcieLink(2, "00000000:3A:00.0", 1, 5, 16, 16, 60, 0)),
        nvlink=(NvlinkErrors(2, "GPU-2", "H100", {3: {"CRC Errors": 150, "Replay Errors": 0}}),
                NvlinkErrors(0, "GPU-0", "H100", {1: {"CRC Errors": 5}})))
    xml = [GpuHealth("0000:18:00", "", "GPU-0", "H100", slowdowns=("hw_thermal_slowdown",))]
    grid = views()
    issues = gpu_issues(grid, plat, xml, OPTS)
    assert [(i.index, i.code) for i in issues] == [
        (0, "gpu.clocks_slowed"), (1, "pcie.downtrained"), (1, "gpu.hot"), (2, "nvlink.errors")]
    assert issues[1].title == "GPU 1 (2A:00.0): PCIe link x8 of x16 (downtrained)"
    assert issues[3].title == "GPU 2 (3A:00.0): NVLink errors on link 3: 150 CRC"
    mark(grid, issues)
    assert [v.verdict for v in grid] == [GpuVerdict.BUSY, GpuVerdict.DEGRADED, GpuVerdict.DEGRADED]
    assert grid[1].reasons == ["PCIe x8 of x16", "88 °C"]


def test_a_recovery_error_counts_at_once_and_idle_gen_1_does_not() -> None:
    plat = Platform(pcie=(PcieLink(0, "", 1, 5, 16, 16, 40, 0),),
                    nvlink=(NvlinkErrors(0, "GPU-0", "H100", {7: {"Recovery Errors": 1}}),))
    issues = gpu_issues(views()[:1], plat, [], OPTS)
    assert [i.code for i in issues] == ["nvlink.errors"]


def port(state: str, phys: str, downed: int | None = 0, symbols: int | None = 0,
         layer: str = "InfiniBand") -> IbPort:
    return IbPort("mlx5_0", 1, state, phys, "200", layer, downed, symbols)


def test_port_verdicts() -> None:
    got = port_issues([port("Initializing", "LinkUp"), port("Down", "Polling", 2),
                       port("Down", "Polling", 0), port("Down", "Disabled"),
                       port("Active", "LinkUp", 5, 500), port("Active", "LinkUp", 2, 3),
                       port("Down", "Polling", 1, layer="Ethernet")], OPTS)
    assert [(p.code, p.severity) for p in got] == [
        ("ib.port_down", Severity.CRITICAL), ("ib.port_down", Severity.CRITICAL),
        ("ib.port_unused", Severity.INFO), ("ib.link_flaps", Severity.WARNING),
        ("ib.symbol_errors", Severity.WARNING), ("ib.port_down", Severity.CRITICAL)]
    assert got[0].title == ("InfiniBand mlx5_0 port 1 is Initializing (physical LinkUp): "
                            "cabled, but no subnet manager made it Active")
    assert got[-1].title.startswith("RoCE port mlx5_0 port 1 is Down")


def diagnosis(findings: list[Finding]) -> Diagnosis:
    return Diagnosis("gpu-01", "gpu_health", DiagnosisStatus.OK, 0.1, tuple(findings))


def f(code: str, severity: Severity, title: str) -> Finding:
    return Finding(code, severity, title)


def headline(findings: list[Finding]) -> Headline:
    return choose(diagnosis(findings), fixes_of)


def test_headline_order_fabric_down_before_actions_platform_after() -> None:
    verdicts = f("gpu.verdicts", Severity.WARNING, "8 GPUs: 1 degraded, 7 busy")
    pcie = f("pcie.downtrained", Severity.WARNING, "GPU 5 (AB:00.0): PCIe link x8 of x16")
    hot = f("gpu.hot", Severity.WARNING, "GPU 4 (9A:00.0) at 91 °C")
    assert headline([verdicts, hot, pcie]).text == "GPU 5 (AB:00.0): PCIe link x8 of x16"
    ib = f("ib.port_down", Severity.CRITICAL, "InfiniBand mlx5_1 port 1 is Down")
    assert headline([verdicts, pcie, ib]).text == "InfiniBand mlx5_1 port 1 is Down"
    wedged = Finding("gpu.wedged", Severity.CRITICAL, "GPU 0 is wedged", evidence={
        "gpu": {"reasons": ["memory held and no live process uses this GPU"]}})
    assert headline([ib, wedged]).text == ("1 GPU wedged: memory held with no process, unit or "
                                           "container using it")
    two = [f("nvlink.errors", Severity.WARNING, "GPU 2: NVLink errors on link 3"),
           f("nvlink.errors", Severity.WARNING, "GPU 5: NVLink errors on link 1")]
    head = headline([verdicts, *two])
    assert head.text == "GPU 2: NVLink errors on link 3 (and 1 more)" and head.covers == (1, 2)


def test_assess_writes_per_gpu_and_per_port_findings() -> None:
    report = Report("gpu-01")
    plat = Platform(pcie=(PcieLink(1, "00000000:2A:00.0", 5, 5, 8, 16, 60, 97),),
                    ib=(port("Down", "Polling", 1),))
    grid = views()
    assess(grid, gpu_issues(grid, plat, [], OPTS), plat, OPTS, report)
    assert [(x.code, x.evidence.get("gpu", {}).get("index")) for x in report.findings] == [
        ("pcie.downtrained", 1), ("ib.port_down", None)]
    assert report.findings[1].evidence["port"]["link_downed"] == 1
