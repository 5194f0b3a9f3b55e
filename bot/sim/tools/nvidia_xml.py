"""``nvidia-smi -q -x`` for a simulated host: the sections the health playbook reads, in
the element names and order of driver 550-580 (nvsmi_device_v12.dtd), nothing more.
"""

from __future__ import annotations

import time

from bot.sim.engine import gpu_processes, gpu_used_mib

TYPE_CHECKING = False  # typing costs every sim command ~5 ms (bot.sim.state)
if TYPE_CHECKING:
    from typing import Any

    from bot.sim.state import State

    Gpu = dict[str, Any]

REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
           "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
           "sw_thermal_slowdown", "display_clocks_setting")


def escape(text: str) -> str:
    """``xml.sax.saxutils.escape``, whose import pulls urllib and http (~60 ms a command)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def _tag(name: str, value: Any) -> str:
    return f"<{name}>{escape(str(value))}</{name}>"


def _reasons(g: Gpu) -> str:
    active = set(g.get("slowdowns", [])) | ({"gpu_idle"} if g["utilization_gpu"] == 0 else set())
    return "<clocks_event_reasons>" + "".join(
        _tag(f"clocks_event_reason_{r}", "Active" if r in active else "Not Active")
        for r in REASONS) + "</clocks_event_reasons>"


def _ecc(g: Gpu) -> str:
    vol = (_tag("sram_correctable", 0) + _tag("sram_uncorrectable_parity", 0)
           + _tag("sram_uncorrectable_secded", 0) + _tag("dram_correctable", 0)
           + _tag("dram_uncorrectable", g["ecc_errors"]))
    return ("<ecc_mode><current_ecc>Enabled</current_ecc><pending_ecc>Enabled</pending_ecc>"
            f"</ecc_mode><ecc_errors><volatile>{vol}</volatile></ecc_errors>")


def _pages(g: Gpu) -> str:
    yes = {True: "Yes", False: "No"}
    return ("<retired_pages><multiple_single_bit_retirement>"
            f"{_tag('retired_count', g.get('retired_pages', 0))}<retired_pagelist>"
            "</retired_pagelist></multiple_single_bit_retirement><double_bit_retirement>"
            "<retired_count>0</retired_count><retired_pagelist></retired_pagelist>"
            "</double_bit_retirement><pending_blacklist>No</pending_blacklist>"
            "<pending_retirement>No</pending_retirement></retired_pages><remapped_rows>"
            "<remapped_row_corr>0</remapped_row_corr>"
            f"{_tag('remapped_row_unc', 1 if g.get('remap_pending') else 0)}"
            f"{_tag('remapped_row_pending', yes[bool(g.get('remap_pending'))])}"
            f"{_tag('remapped_row_failure', yes[bool(g.get('remap_failure'))])}"
            "</remapped_rows>")


def _procs(state: State, g: Gpu) -> str:
    rows = [f"<process_info><pid>{p['pid']}</pid><type>C</type>"
            f"{_tag('process_name', p['args'].split(' ', 1)[0])}"
            f"<used_memory>{mib} MiB</used_memory></process_info>"
            for p, mib in gpu_processes(state, g["index"], listed=True)] \
        if state["nvidia"]["sees_pids"] else []
    return "<processes>" + "".join(rows) + "</processes>"


def gpu_xml(state: State, g: Gpu) -> str:
    used, total = gpu_used_mib(state, g["index"]), int(g["memory_total_mib"])
    fabric = "Completed" if state["nvidia"].get("fabric") else "N/A"
    return (f'<gpu id="{g["bus_id"]}">{_tag("product_name", g["name"])}'
            f"{_tag('persistence_mode', g['persistence_mode'])}{_tag('uuid', g['uuid'])}"
            f"<gpu_recovery_action>None</gpu_recovery_action><pci>"
            f"{_tag('pci_bus_id', g['bus_id'])}{_tag('replay_counter', g.get('pcie_replays', 0))}"
            f"</pci>{_tag('performance_state', g['perf'])}{_reasons(g)}<fb_memory_usage>"
            f"<total>{total} MiB</total><used>{used} MiB</used><free>{total - used} MiB</free>"
            f"</fb_memory_usage>{_tag('compute_mode', g['compute_mode'])}<utilization>"
            f"<gpu_util>{g['utilization_gpu']} %</gpu_util></utilization>{_ecc(g)}{_pages(g)}"
            f"<fabric>{_tag('state', fabric)}<status>N/A</status></fabric>{_procs(state, g)}"
            "</gpu>")


def xml_report(state: State, gpus: list[Gpu], now: float) -> str:
    stamp = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(now))
    body = "".join(gpu_xml(state, g) for g in gpus)
    return ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
            f"<nvidia_smi_log>{_tag('timestamp', stamp)}"
            f"{_tag('driver_version', state['nvidia']['driver_version'])}"
            f"{_tag('cuda_version', state['nvidia']['cuda_version'])}"
            f"{_tag('attached_gpus', len(gpus))}{body}</nvidia_smi_log>\n")
