"""Hardware faults outlive their alerts (issue 35). Pure.

An Xid 79 (fallen off the bus), 48/94/95 (uncorrectable ECC), a failed row remap or a
missing GPU does not heal because an exporter stopped reporting it: the alert clearing
says something about the alert, not the GPU. An incident whose finding is such a fault is
therefore not resolved by its alert clearing (``bot.domain.planner``): it stays open, the
message says the alert cleared and the fault is still there, until a probe shows
otherwise (a fresh diagnosis without the fault resolves it) or a person resolves it.

Which findings count: the playbooks' per-GPU ``gpu.broken`` verdict (an Xid that breaks
the GPU, uncorrectable ECC, a failed or pending row remap, a device the tool cannot open)
and ``gpu.missing``. Before there is a diagnosis to go by (or when it could not read the
host), the alert's kind says it: the GPU-health kinds.
"""

from __future__ import annotations

from bot.domain.findings import DiagnosisStatus, Finding, Severity
from bot.domain.incident import Incident

HARDWARE_FINDINGS = frozenset({"gpu.broken", "gpu.missing"})
HARDWARE_KINDS = frozenset({"gpu_xid", "gpu_ecc", "gpu_missing"})


def outlasting(incident: Incident) -> list[Finding]:
    """The critical hardware findings of the incident's diagnosis."""
    d = incident.diagnosis
    if d is None:
        return []
    return [f for f in d.findings
            if f.code in HARDWARE_FINDINGS and f.severity is Severity.CRITICAL]


def outlives_alert(incident: Incident) -> bool:
    """Does this incident stay open when its alert clears? Its diagnosis names a hardware
    fault; with no diagnosis that read the host, its alert is a hardware kind."""
    d = incident.diagnosis
    if d is None or d.status is DiagnosisStatus.UNREACHABLE:
        return incident.kind in HARDWARE_KINDS
    return bool(outlasting(incident))
