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
