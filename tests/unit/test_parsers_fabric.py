"""The fabric and platform parsers (issue 36) on real tool outputs (tests/fixtures/real) and
on the shapes the vendors document: ``dcgmi diag -j`` 3.x and 4.x, ``nvidia-smi nvlink -e``,
``ibstat`` and sysfs, the PCIe query, and the smoke script's lines."""

from __future__ import annotations

import json
from pathlib import Path

from playbooks.commands import IB_SECTION
from playbooks.parsers.dcgm import DiagStatus, failure_lines, parse_diag_json
from playbooks.parsers.infiniband import parse_ib, parse_ib_sysfs, parse_ibstat
from playbooks.parsers.nvlink import parse_nvlink_errors
from playbooks.parsers.pcie import parse_pcie
from playbooks.parsers.smoke import parse_smoke

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def real(name: str) -> str:
    return (REAL / name).read_text()


def test_dcgm_3x_vendor_sample_fails_sm_stress_on_three_gpus() -> None:
    diag = parse_diag_json(real("dcgmi_diag_json_3x_per_gpu.json"))
    assert diag.error is None and not diag.passed
    assert [t.name for t in diag.failed] == ["sm_stress"]
    assert diag.failed[0].failed_gpus == [0, 2, 3]
    assert failure_lines(diag) == ["sm_stress failed on GPU 0, 2, 3: Max stress level of 2128.7 "
                                   "did not exceed desired stress level of 3000.0 for GPU 0"]
    memory = next(t for t in diag.tests if t.name == "memory")
    assert memory.status is DiagStatus.PASS  # one GPU skipped, three passed: not a failure


def dcgm4(status: str, warning: str = "") -> str:
    """A 4.x document built to NVIDIA/DCGM's dcgm_diag_schema.json (not a capture)."""
    result = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3, "status": status}
    if warning:
        result["warnings"] = [{"error_category": 5, "error_id": 42, "error_severity": 1,
                               "warning": warning}]
    return json.dumps({"DCGM Diagnostic": {"test_categories": [
        {"category": "Deployment", "tests": [{"name": "software", "results": [
            {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}],
            "test_summary": {"status": "Pass"}}]},
        {"category": "Hardware", "tests": [{"name": "memory", "results": [result],
                                            "test_summary": {"status": status}}]}]},
        "metadata": {"version": "4.2.3"}})


def test_dcgm_4x_reads_the_test_summary_and_the_entity() -> None:
    ok = parse_diag_json(dcgm4("Pass"))
    assert ok.passed and ok.version == "4.2.3" and len(ok.tests) == 2
    bad = parse_diag_json("Successfully ran diagnostic for group.\n" + dcgm4(
        "Fail", "GPU 3: DBE detected"))
    assert not bad.passed and failure_lines(bad) == ["memory failed on GPU 3: GPU 3: DBE detected"]


def test_dcgm_without_a_verdict_is_never_a_pass() -> None:
    for text in ("", "Error: unable to establish a connection to the specified host",
                 '{"DCGM Diagnostic": {"test_categories": [', "[1, 2]"):
        diag = parse_diag_json(text)
        assert diag.error and not diag.passed, text
    runtime = parse_diag_json(json.dumps({"DCGM Diagnostic": {
        "runtime_error": "The GPU list is empty"}}))
    assert runtime.error == "The GPU list is empty" and not runtime.passed
    assert not parse_diag_json("dcgmi: not installed\n").installed


def test_nvlink_h100_counters_with_the_sources_elision() -> None:
    (gpu,) = parse_nvlink_errors(real("nvlink_e_h100.txt"))
    assert (gpu.index, gpu.name) == (0, "NVIDIA H100 80GB HBM3")
    assert sorted(gpu.links) == [0, 1, 17]
    assert gpu.links[17] == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
    assert gpu.erring == {}


def test_nvlink_erring_links_and_odd_values() -> None:
    text = ("GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n\t Link 3: CRC Errors: 12\n"
            "\t Link 3: Replay Errors: N/A\n\t Link 4: CRC Errors: 0\n")
    (gpu,) = parse_nvlink_errors(text)
    assert gpu.erring == {3: {"CRC Errors": 12}} and gpu.total(3) == 12


def test_ibstat_real_ports() -> None:
    (init,) = parse_ibstat(real("ibstat_mlx5_initializing.txt"))
    assert (init.ca, init.port, init.state, init.physical_state, init.rate, init.link_layer) == (
        "mlx5_0", 1, "Initializing", "LinkUp", "100", "InfiniBand")
    assert not init.active
    (up,) = parse_ibstat(real("ibstat_mlx4_active.txt"))
    assert up.active and up.name == "mlx4_0 port 1" and up.rate == "40"


def test_ib_sysfs_lines_and_the_merge_with_ibstat() -> None:
    sysfs = ("/sys/class/infiniband/mlx5_0/ports/1|4: ACTIVE|5: LinkUp|9|2412|200 Gb/sec (4X HDR)\n"
             "/sys/class/infiniband/mlx5_1/ports/1|1: DOWN|2: Polling|1|0|10 Gb/sec (4X SDR)\n"
             "garbage line\n")
    ports = parse_ib_sysfs(sysfs)
    assert [(p.ca, p.state, p.physical_state, p.link_downed, p.symbol_error) for p in ports] == [
        ("mlx5_0", "Active", "LinkUp", 9, 2412), ("mlx5_1", "Down", "Polling", 1, 0)]
    merged = parse_ib(real("ibstat_mlx5_initializing.txt") + f"{IB_SECTION}\n" + sysfs)
    assert [(p.ca, p.state, p.link_downed) for p in merged] == [
        ("mlx5_0", "Initializing", 9), ("mlx5_1", "Down", 1)]  # ibstat's words, sysfs's counters
    assert parse_ib(f"{IB_SECTION}\n") == []  # no InfiniBand on this host


def test_pcie_idle_l40s_is_at_its_width_and_not_slow() -> None:
    links = parse_pcie(real("smi_query_pcie_l40s_idle.txt"))
    assert len(links) == 8 and all((p.gen, p.gen_max, p.width, p.width_max) == (1, 4, 16, 16)
                                   for p in links)
    assert not any(p.narrow or p.slow(5) for p in links)  # gen 1 is the idle link, not a fault


def test_pcie_x8_of_x16_is_narrow_and_busy_gen_matters() -> None:
    links = parse_pcie(real("smi_query_pcie_x8_of_x16.txt"))
    assert [p.narrow for p in links] == [False, True]
    busy = parse_pcie("0, 00000000:18:00.0, 3, 5, 16, 16, 71, 97\n")[0]
    assert busy.slow(5) and not busy.narrow and busy.temp_c == 71 and busy.bus


def test_smoke_lines() -> None:
    text = ("warning: something torch said\n"
            '{"smoke": 1, "gpu": 0, "uuid": "GPU-a", "matmul_tflops": 612.5, "mem_gbps": 2901.2,'
            ' "h2d_gbps": 51.9, "errors": []}\n'
            '{"smoke": 1, "gpu": 1, "uuid": "GPU-b", "matmul_tflops": 40.0, "errors": ["bad"]}\n'
            '{"smoke": 1, "done": true, "torch": "2.4.0"}\n')
    rep = parse_smoke(text)
    assert rep.done and rep.error is None and rep.torch == "2.4.0"
    assert [(g.key, g.matmul_tflops, g.errors) for g in rep.gpus] == [
        ("GPU-a", 612.5, ()), ("GPU-b", 40.0, ("bad",))]
    cut = parse_smoke(text.rsplit("\n", 2)[0])
    assert not cut.done  # killed before its end: incomplete
    none = parse_smoke('{"smoke": 1, "error": "torch sees no CUDA device"}\n')
    assert none.error == "torch sees no CUDA device" and not none.gpus
