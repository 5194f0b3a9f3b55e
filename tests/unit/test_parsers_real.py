"""Every file in tests/fixtures/real/ through its parser: what real hosts printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from playbooks.parsers.disk import parse_journal_usage
from playbooks.parsers.host import parse_free
from playbooks.parsers.kernel import bus_key, parse_kernel_log
from playbooks.parsers.nvidia import parse_gpu_samples, parse_query_gpu, unread_lines
from playbooks.parsers.nvidia_xml import parse_query_xml
from playbooks.parsers.smi_errors import SmiError, SmiErrorKind, parse_smi_errors, smi_problems

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
K = SmiErrorKind


def real(name: str) -> str:
    return (REAL / name).read_text()


def test_every_fixture_is_named_in_the_readme() -> None:
    readme = real("README.md")
    files = sorted(p.name for p in REAL.iterdir() if p.is_file() and p.name != "README.md")
    assert len(files) >= 30
    assert [f for f in files if f"`{f}`" not in readme] == []


SMI = [
    ("smi_nvml_mismatch_570.txt", K.NVML_MISMATCH, None, "570.124"),
    ("smi_nvml_mismatch_550.txt", K.NVML_MISMATCH, None, "550.144"),
    ("smi_nvml_mismatch_plain.txt", K.NVML_MISMATCH, None, None),
    ("smi_nvml_mismatch_capital.txt", K.NVML_MISMATCH, None, None),
    ("smi_no_devices.txt", K.NO_DEVICES, None, None),
    ("smi_no_driver.txt", K.NO_DRIVER, None, None),
    ("smi_no_driver_noperiod.txt", K.NO_DRIVER, None, None),
    ("smi_handle_unknown_error.txt", K.DEVICE_HANDLE, "0000:0b:00", None),
    ("smi_handle_unknown_error_nospace.txt", K.DEVICE_HANDLE, "0000:07:00", None),
    ("smi_handle_unknown_error_09.txt", K.DEVICE_HANDLE, "0000:09:00", None),
    ("smi_gpu_is_lost.txt", K.GPU_LOST, "0000:02:00", None),
]


@pytest.mark.parametrize(("name", "kind", "bus", "library"), SMI)
def test_nvidia_smi_errors_are_findings_not_an_empty_inventory(
        name: str, kind: SmiErrorKind, bus: str | None, library: str | None) -> None:
    text = real(name)
    # no rows: the row parsers answer with the tool's error, never "no GPUs"
    for parsed in (parse_query_gpu(text), parse_gpu_samples(text)):
        assert isinstance(parsed, SmiError) and parsed.kind is kind
    errors = parse_smi_errors(text)
    assert [(e.kind, e.bus, e.library_version) for e in errors] == [(kind, bus, library)]
    assert text.splitlines()[0].strip() in errors[0].quote
    problems = smi_problems(text, "", 6, False, unread_lines(text), 10)
    assert [p.kind for p in problems] == [kind]  # the library line is not "unreadable"


def test_unknown_failure_and_hang_quote_the_tool() -> None:
    odd = smi_problems("", "Segmentation fault\n", 139, False, [], 10)
    assert [(p.kind, p.quote) for p in odd] == [
        (K.FAILED, "nvidia-smi exited with status 139: Segmentation fault")]
    hung = smi_problems("", "", None, True, [], 12.5)
    assert hung[0].kind is K.HUNG and "12.5 s" in hung[0].quote
    garbage = smi_problems("0, GPU-x, 1, 2, 3, A\nwhat is this\n", "", 0, False,
                           unread_lines("0, GPU-x, 1, 2, 3, A\nwhat is this\n"), 10)
    assert [(p.kind, p.quote) for p in garbage] == [(K.UNREADABLE, "what is this")]


def test_xml_575_reads_health_fields() -> None:
    rep = parse_query_xml(real("smi_qx_575_laptop.xml"))
    assert rep.error is None and rep.driver_version == "575.51.02" and rep.attached == 1
    (g,) = rep.gpus
    assert (g.bus, g.uuid, g.persistence) == ("0000:01:00", "GPU-529b3263-c96d-b557-bc75-"
                                              "697f04917eda", "Enabled")
    assert (g.ecc_uncorrected, g.retired_dbe, g.remap_pending, g.remap_failure) == (
        None, None, False, False)
    assert (g.slowdowns, g.replays, g.memory_used_mib, g.memory_total_mib, g.util_pct) == (
        (), 0, 2026, 8188, 30)
    assert g.pids == (1802, 1890) and g.recovery_action == "None" and g.fabric_state is None


def test_xml_truncated_is_an_error_not_zero_gpus_and_old_driver_has_no_sections() -> None:
    cut = parse_query_xml(real("smi_qx_430_truncated.xml"))
    assert cut.gpus == [] and cut.error and "not a complete" in cut.error
    old = parse_query_xml(real("smi_qx_340_geforce.xml"))
    (g,) = old.gpus
    assert (g.bus, g.persistence, g.ecc_uncorrected, g.remap_pending) == (
        "0000:01:00", "Disabled", None, None)
    frag = parse_query_xml(real("smi_qx_throttle_fragment.xml"))
    assert frag.gpus == [] and frag.error


def test_xml_ecc_remap_and_slowdowns_when_set() -> None:
    text = real("smi_qx_575_laptop.xml").replace(
        "<dram_uncorrectable>N/A</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>"
    ).replace("<remapped_row_pending>No", "<remapped_row_pending>Yes").replace(
        "<clocks_event_reason_hw_slowdown>Not Active", "<clocks_event_reason_hw_slowdown>Active")
    (g,) = parse_query_xml(text).gpus
    assert (g.ecc_uncorrected, g.remap_pending, g.slowdowns) == (2, True, ("hw_slowdown",))


KERNEL = [
    ("kmsg_xid79.txt", [("0000:44:00", 79)]),
    ("kmsg_fallen_off_bus.txt", [("0000:b3:00", 79)]),
    ("dmesg_ctime_xid13_109.txt", [("0000:cb:00", 13)] * 3 + [("0000:cb:00", 109)]),
    ("dmesg_T_xid43_31_94.txt", [("0000:00:05", 43), ("0000:00:05", 43), ("0000:00:07", 31),
                                 ("0000:00:08", 94)]),
    ("journal_k_xid45_nvlink.txt", [("0000:dc:00", 45), ("0000:ed:00", 45), ("0000:ba:00", 45),
                                    ("0000:97:00", 45)]),
    ("kmsg_xid_nvlink_144_149.txt", [("0019:01:00", 149), ("0018:01:00", 145),
                                     ("0000:01:00", 144)]),
    ("kmsg_xid94_contained.txt", [("0000:9b:00", 94)]),
]


@pytest.mark.parametrize(("name", "want"), KERNEL)
def test_kernel_xids(name: str, want: list[tuple[str, int]]) -> None:
    assert [(e.bus, e.xid) for e in parse_kernel_log(real(name)).xids] == want


def test_xid_pid_and_process() -> None:
    events = parse_kernel_log(real("dmesg_ctime_xid13_109.txt")).xids
    assert (events[0].pid, events[0].process) == (None, "<unknown>")
    assert (events[3].pid, events[3].process) == (1797828, "pt_main_thread")
    assert events[3].detail.startswith("Ch 00000008, errorString CTX SWITCH TIMEOUT")


@pytest.mark.parametrize(("name", "client", "kernel"), [
    ("dmesg_api_mismatch.txt", "515.48.07", "510.73.05"),
    ("journal_api_mismatch_012.txt", "535.54.03", "530.30.02"),
    ("dmesg_api_mismatch_client.txt", "595.84", "595.80"),
    ("dmesg_api_mismatch_prefixed.txt", "570.148.08", "570.148.06"),
])
def test_api_mismatch_versions(name: str, client: str, kernel: str) -> None:
    (m,) = parse_kernel_log(real(name)).mismatches
    assert (m.client_version, m.kernel_version) == (client, kernel)


def test_init_failures_and_probe_lines_have_no_xid() -> None:
    rep = parse_kernel_log(real("syslog_rm_init_adapter_failed.txt"))
    assert rep.init_failures == [("0000:01:00", "0x22:0x56:884")] and rep.xids == []
    none = parse_kernel_log(real("dmesg_probe_not_called.txt"))
    assert (none.xids, none.mismatches, none.init_failures) == ([], [], [])


def test_bus_key_spellings_agree() -> None:
    assert bus_key("00000000:3B:00.0") == bus_key("0000:3b:00") == bus_key("3b:00.0")


MIB = 1024 * 1024


@pytest.mark.parametrize(("name", "total", "used", "avail"), [
    ("free_m_procps_3.3.9.txt", 4045, 1548, 2497),
    ("free_m_old_gameserver.txt", 32205, 9246, 22958),
    ("free_m_procps_3.3.10.txt", 3957, 551, 3193),
    ("free_w_centos7.txt", 64261872, 12977824, 36105664),
])
def test_free_every_procps(name: str, total: int, used: int, avail: int) -> None:
    mem = parse_free(real(name))
    assert mem is not None and (mem.total, mem.used, mem.available) == (total, used, avail)


@pytest.mark.parametrize(("name", "size"), [
    ("journal_usage_on_disk.txt", int(1.2 * 1024**3)),
    ("journal_usage_file_system.txt", int(3.7 * 1024**3)),
    ("journal_usage_oldest.txt", 8 * MIB),
])
def test_journal_usage_every_wording(name: str, size: int) -> None:
    assert parse_journal_usage(real(name)) == size


def test_xml_after_an_error_line_is_still_read() -> None:
    text = real("smi_handle_unknown_error.txt") + real("smi_qx_575_laptop.xml")
    rep = parse_query_xml(text)
    assert rep.error is None and [g.bus for g in rep.gpus] == ["0000:01:00"]
