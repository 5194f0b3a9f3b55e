"""The fixed GPU command texts, spelled once: playbooks, remediation's verify step, the
digest sampler, the agent's fallback and the simulated hosts' tests all use these.

Fields are requested in a fixed order so free text (GPU and process names, which may
hold commas) sits last, where the CSV parser can re-join it.
"""

from __future__ import annotations

QUERY_GPU_FIELDS = "index,uuid,memory.used,memory.total,utilization.gpu,name"
QUERY_APPS_FIELDS = "pid,gpu_uuid,used_memory,process_name"
CSV = "--format=csv,noheader,nounits"
QUERY_GPU_COMMAND = f"nvidia-smi --query-gpu={QUERY_GPU_FIELDS} {CSV}"
# The sampler's one looping nvidia-smi (``probes.gpu_samples``): ``count`` first, so the
# host can tell when a sample is complete; the loop strips it again.
SAMPLE_GPU_COMMAND = f"nvidia-smi --query-gpu=count,{QUERY_GPU_FIELDS} {CSV}"
QUERY_APPS_COMMAND = f"nvidia-smi --query-compute-apps={QUERY_APPS_FIELDS} {CSV}"
QUERY_XML_COMMAND = "nvidia-smi -q -x"
# The kernel ring buffer of this boot: journald's copy first (survives a full ring
# buffer), dmesg where there is no journal. Both print NVRM lines the same way.
KERNEL_LOG_COMMAND = "journalctl -k -b --no-pager -q 2>/dev/null || dmesg"
FABRIC_MANAGER_COMMAND = "systemctl is-active nvidia-fabricmanager"
DCGM_MISSING = "dcgmi: not installed"
DCGM_DIAG_COMMAND = (f"if command -v dcgmi >/dev/null 2>&1; then dcgmi diag -r 1; "
                     f"else echo '{DCGM_MISSING}'; fi")
# The health gate (issue 36): exact times for "no new Xid since the repair" (dmesg's are
# seconds since boot), and DCGM's diagnostic as JSON at a level the gate names.
GATE_KERNEL_COMMAND = "journalctl -k -b -o short-unix --no-pager -q 2>/dev/null || dmesg"


def dcgm_json_command(level: int) -> str:
    """``dcgmi diag -r LEVEL -j`` where DCGM is installed (``level`` is 1..4, an int)."""
    return (f"if command -v dcgmi >/dev/null 2>&1; then dcgmi diag -r {int(level)} -j; "
            f"else echo '{DCGM_MISSING}'; fi")
# Fabric and platform (issue 36): the PCIe link, temperature and NVLink counters in one
# nvidia-smi round trip (a hung driver costs one channel, not two); InfiniBand from ibstat
# where installed and from sysfs always (the counters are only there).
PLATFORM_FIELDS = ("index,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,"
                   "pcie.link.width.current,pcie.link.width.max,temperature.gpu,utilization.gpu")
PLATFORM_SECTION = "==incident-bot:nvlink=="
PLATFORM_COMMAND = (f"nvidia-smi --query-gpu={PLATFORM_FIELDS} {CSV}; "
                    f"echo {PLATFORM_SECTION}; nvidia-smi nvlink -e")
IB_SECTION = "==incident-bot:ib-sysfs=="
IB_COMMAND = ("if command -v ibstat >/dev/null 2>&1; then ibstat 2>/dev/null; fi; "
              f"echo {IB_SECTION}; for p in /sys/class/infiniband/*/ports/*; do "
              "[ -r \"$p/state\" ] || continue; "
              "printf '%s|%s|%s|%s|%s|%s\\n' \"$p\" \"$(cat \"$p/state\")\" "
              "\"$(cat \"$p/phys_state\" 2>/dev/null)\" "
              "\"$(cat \"$p/counters/link_downed\" 2>/dev/null)\" "
              "\"$(cat \"$p/counters/symbol_error\" 2>/dev/null)\" "
              "\"$(cat \"$p/rate\" 2>/dev/null)\"; done")
