"""Every real tool output in tests/fixtures/real/ through the parser the bot reads it with:
each gives a value (rows, a number, a record) or the tool's own error in its words, never
an empty answer that would read as "nothing there" (issue 35: "Failed to initialize NVML"
read as "no GPUs", a driver/library mismatch read as "8 GPUs: 8 broken").

The table names every file; a new fixture without a row here fails the completeness test,
so a real output cannot be added without saying how it is read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.chat.listeners import Click
from bot.domain.host_state import ProcState
from playbooks.parsers import (
    dcgm,
    disk,
    host,
    infiniband,
    kernel,
    nvidia,
    nvidia_xml,
    nvlink,
    pcie,
    ps,
    slurm,
    systemd,
)
from playbooks.parsers.refusal import RefusalKind, ToolRefusal, refusal
from playbooks.parsers.smi_errors import SmiError, SmiErrorKind

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def _smi(text: str) -> Any:
    return nvidia.parse_query_gpu(text)


def _is_smi_error(kind: SmiErrorKind) -> Callable[[str, Any], bool]:
    def check(text: str, got: Any) -> bool:
        first = next(ln.strip() for ln in text.splitlines() if ln.strip())
        return isinstance(got, SmiError) and got.kind is kind and first in got.quote
    return check


def _kernel_value(text: str, got: kernel.KernelReport) -> bool:
    return bool(got.xids or got.mismatches or got.init_failures or got.unbound)


def _xml_value(text: str, got: nvidia_xml.XmlReport) -> bool:
    return bool(got.gpus) != bool(got.error)  # GPUs read, or why not (never both, never none)


def _slurm_node(text: str) -> Any:
    return slurm.parse_node(text) or slurm.node_error(text)


def _ps_tree(text: str) -> list[tuple[str, ...]]:
    return [tuple(line.split(None, 3)) for line in text.splitlines() if line.strip()]


def _ps_proc(text: str) -> ProcState:
    return ps.parse_process(int(text.split()[0]), text)


def _refused(kind: RefusalKind) -> Callable[[str, Any], bool]:
    def check(text: str, got: Any) -> bool:
        return isinstance(got, ToolRefusal) and got.kind is kind and got.quote == text.strip()
    return check


def _truthy(text: str, got: Any) -> bool:
    return bool(got)


def _not_none(text: str, got: Any) -> bool:
    return got is not None


K = SmiErrorKind
# file -> (the parser the bot reads it with, what a value or the tool's error looks like)
READ: dict[str, tuple[Callable[[str], Any], Callable[[str, Any], bool]]] = {
    "smi_nvml_mismatch_570.txt": (_smi, _is_smi_error(K.NVML_MISMATCH)),
    "smi_nvml_mismatch_550.txt": (_smi, _is_smi_error(K.NVML_MISMATCH)),
    "smi_nvml_mismatch_plain.txt": (_smi, _is_smi_error(K.NVML_MISMATCH)),
    "smi_nvml_mismatch_capital.txt": (_smi, _is_smi_error(K.NVML_MISMATCH)),
    "smi_nvml_insufficient_permissions.txt": (_smi, _is_smi_error(K.DENIED)),
    "smi_no_devices.txt": (_smi, _is_smi_error(K.NO_DEVICES)),
    "smi_no_driver.txt": (_smi, _is_smi_error(K.NO_DRIVER)),
    "smi_no_driver_noperiod.txt": (_smi, _is_smi_error(K.NO_DRIVER)),
    "smi_handle_unknown_error.txt": (_smi, _is_smi_error(K.DEVICE_HANDLE)),
    "smi_handle_unknown_error_nospace.txt": (_smi, _is_smi_error(K.DEVICE_HANDLE)),
    "smi_handle_unknown_error_09.txt": (_smi, _is_smi_error(K.DEVICE_HANDLE)),
    "smi_gpu_is_lost.txt": (_smi, _is_smi_error(K.GPU_LOST)),
    "smi_command_not_found_bash.txt": (_smi, _is_smi_error(K.MISSING)),
    "smi_not_found_dash.txt": (_smi, _is_smi_error(K.MISSING)),
    "smi_qx_575_laptop.xml": (nvidia_xml.parse_query_xml, _xml_value),
    "smi_qx_430_truncated.xml": (nvidia_xml.parse_query_xml, _xml_value),
    "smi_qx_340_geforce.xml": (nvidia_xml.parse_query_xml, _xml_value),
    "smi_qx_throttle_fragment.xml": (nvidia_xml.parse_query_xml, _xml_value),
    "kmsg_fallen_off_bus.txt": (kernel.parse_kernel_log, _kernel_value),
    "kmsg_xid79.txt": (kernel.parse_kernel_log, _kernel_value),
    "dmesg_ctime_xid13_109.txt": (kernel.parse_kernel_log, _kernel_value),
    "dmesg_T_xid43_31_94.txt": (kernel.parse_kernel_log, _kernel_value),
    "journal_k_xid45_nvlink.txt": (kernel.parse_kernel_log, _kernel_value),
    "kmsg_xid_nvlink_144_149.txt": (kernel.parse_kernel_log, _kernel_value),
    "kmsg_xid94_contained.txt": (kernel.parse_kernel_log, _kernel_value),
    "dmesg_api_mismatch.txt": (kernel.parse_kernel_log, _kernel_value),
    "journal_api_mismatch_012.txt": (kernel.parse_kernel_log, _kernel_value),
    "dmesg_api_mismatch_client.txt": (kernel.parse_kernel_log, _kernel_value),
    "dmesg_api_mismatch_prefixed.txt": (kernel.parse_kernel_log, _kernel_value),
    "syslog_rm_init_adapter_failed.txt": (kernel.parse_kernel_log, _kernel_value),
    "dmesg_probe_not_called.txt": (kernel.parse_kernel_log, _kernel_value),
    "dmesg_not_permitted.txt": (kernel.parse_kernel_log,
                                lambda text, got: got.error == text.strip() and not got.xids),
    "sudo_n_password_required.txt": (refusal, _refused(RefusalKind.SUDO)),
    "free_m_procps_3.3.9.txt": (host.parse_free, _not_none),
    "free_m_old_gameserver.txt": (host.parse_free, _not_none),
    "free_m_procps_3.3.10.txt": (host.parse_free, _not_none),
    "free_w_centos7.txt": (host.parse_free, _not_none),
    "journal_usage_on_disk.txt": (disk.parse_journal_usage, _not_none),
    "journal_usage_file_system.txt": (disk.parse_journal_usage, _not_none),
    "journal_usage_oldest.txt": (disk.parse_journal_usage, _not_none),
    "systemctl_show_ssh_restart.txt": (
        lambda t: systemd.unit_state("ssh.service", systemd.parse_show(t)),
        lambda text, got: got.restart == "on-failure" and got.n_restarts == 5),
    "nvidia_smi_gpu_reset_ok.txt": (nvidia.parse_gpu_reset,
                                    lambda text, got: bool(got and got.reset)),
    "nvidia_smi_gpu_reset_in_use.txt": (nvidia.parse_gpu_reset,
                                        lambda text, got: bool(got and got.refused)),
    "df_PT_B1_coreutils_9_1.txt": (disk.parse_df, lambda text, got: len(got) == 3),
    "ps_pid_cgroup_v1_no_unit.txt": (_ps_proc, lambda text, got: got.alive),
    "slurm_show_node_idle.txt": (_slurm_node, _truthy),
    "slurm_show_node_allocated.txt": (_slurm_node, _truthy),
    "slurm_show_node_draining.txt": (_slurm_node, _truthy),
    "slurm_show_node_drained.txt": (_slurm_node, _truthy),
    "slurm_show_node_drained_multiline.txt": (_slurm_node, _truthy),
    "slurm_show_node_draining_person.txt": (_slurm_node, _truthy),
    "slurm_show_node_not_found.txt": (_slurm_node, lambda text, got: got == text.strip()),
    "slurm_squeue_running.txt": (slurm.parse_jobs, _truthy),
    "slurm_squeue_unlimited.txt": (slurm.parse_jobs, _truthy),
    "slurm_ps_job_tree.txt": (_ps_tree, lambda text, got: any(
        slurm.job_of_stepd(r[-1]) for r in got)),
    "dcgmi_diag_json_3x_per_gpu.json": (dcgm.parse_diag_json,
                                        lambda text, got: bool(got.tests) and not got.error),
    "ibstat_mlx4_active.txt": (infiniband.parse_ibstat, _truthy),
    "ibstat_mlx5_initializing.txt": (infiniband.parse_ibstat, _truthy),
    "kmsg_xid74_nvlink.txt": (kernel.parse_kernel_log, _kernel_value),
    "nvlink_e_h100.txt": (nvlink.parse_nvlink_errors, _truthy),
    "smi_query_pcie_l40s_idle.txt": (pcie.parse_pcie, _truthy),
    "smi_query_pcie_x8_of_x16.txt": (pcie.parse_pcie, _truthy),
    "slack/block_actions_button.json": (lambda t: Click.from_body(json.loads(t)),
                                        lambda text, got: bool(got.user and got.action_id)),
    "slack/socket_mode_frames.json": (json.loads, lambda text, got: bool(
        got["events_api"]["envelope_id"] and got["hello"]["type"] == "hello")),
}


def _fixtures() -> list[str]:
    return sorted(str(p.relative_to(REAL)) for p in REAL.rglob("*")
                  if p.is_file() and p.name != "README.md")


def test_every_real_output_has_its_parser_here() -> None:
    assert sorted(READ) == _fixtures()


@pytest.mark.parametrize("name", sorted(READ))
def test_a_real_output_reads_as_a_value_or_the_tools_error(name: str) -> None:
    text = (REAL / name).read_text()
    parse, check = READ[name]
    got = parse(text)
    assert check(text, got), (name, got)


def test_a_tool_error_is_never_an_empty_list() -> None:
    """The shape the old parser had: an error with no rows came back as ``[]``."""
    for name, (parse, _) in READ.items():
        if parse is _smi:
            assert nvidia.parse_query_gpu((REAL / name).read_text()) != [], name
