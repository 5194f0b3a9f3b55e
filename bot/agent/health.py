"""GPU health from NVML: critical Xid events, the device count against the inventory,
volatile uncorrectable ECC and GPUs that NVML reports lost.

Xid events come from an NVML event set registered once for ``nvmlEventTypeXidCriticalError``
and drained without waiting at every check; only Xids the policy blames on the GPU become
``gpu_xid`` alerts (an application's Xid 13 is the application's business).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bot.agent.checks import Alert, make_alert
from bot.domain.xid import DEFAULT_POLICY, Fault, XidPolicy

log = logging.getLogger(__name__)
XID_CRITICAL_EVENT = 0x8  # nvmlEventTypeXidCriticalError
NVML_ERROR_TIMEOUT, NVML_ERROR_GPU_IS_LOST, NOT_SUPPORTED = 10, 15, 3
UNCORRECTED, VOLATILE = 1, 0  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC
MAX_EVENTS = 256  # drained per check, so a storm cannot stall the loop


@dataclass(frozen=True)
class XidSeen:
    index: int
    xid: int


class HealthWatch:
    """Holds the NVML event set; ``nvml`` is the initialised module (or None)."""

    def __init__(self, expected: int | None = None, policy: XidPolicy = DEFAULT_POLICY) -> None:
        self.expected = expected
        self.policy = policy
        self.events: Any = None

    def xids(self, nvml: Any) -> list[XidSeen]:
        """Critical Xid events since the last call (registering on first use)."""
        if self.events is None and not self._register(nvml):
            return []
        seen: list[XidSeen] = []
        for _ in range(MAX_EVENTS):
            try:
                event = nvml.nvmlEventSetWait_v2(self.events, 0)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) != NVML_ERROR_TIMEOUT:
                    log.warning("NVML event wait: %s", exc)
                break
            if int(event.eventType) & XID_CRITICAL_EVENT:
                seen.append(XidSeen(_index(nvml, event.device), int(event.eventData)))
        return seen

    def _register(self, nvml: Any) -> bool:
        try:
            self.events = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            log.warning("Xid events unavailable: %s", exc)
            return False
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                nvml.nvmlDeviceRegisterEvents(handle, XID_CRITICAL_EVENT, self.events)
            except nvml.NVMLError as exc:
                log.warning("GPU %d: Xid events not registered: %s", index, exc)
        return True

    def close(self, nvml: Any) -> None:
        if self.events is not None:
            try:
                nvml.nvmlEventSetFree(self.events)
            except nvml.NVMLError as exc:
                log.debug("nvmlEventSetFree: %s", exc)
        self.events = None

    def xid_alerts(self, host: str, nvml: Any) -> list[Alert]:
        """One ``gpu_xid`` alert per event the policy does not blame on the application."""
        return [make_alert(host, "gpu_xid", f"gpu{x.index}:xid{x.xid}", "firing",
                           f"Xid {x.xid} on GPU {x.index}: {self.policy.rule(x.xid).title}",
                           {"index": x.index, "xid": x.xid}, severity="critical")
                for x in self.xids(nvml) if self.policy.rule(x.xid).fault is not Fault.APP]

    def missing(self, nvml: Any) -> dict[str, dict[str, Any]]:
        """``gpu_missing`` conditions: fewer devices than expected, and lost devices."""
        count = nvml.nvmlDeviceGetCount()
        out: dict[str, dict[str, Any]] = {}
        if self.expected is not None and count < self.expected:
            out["count"] = {"summary": f"{count} of {self.expected} GPUs visible to NVML",
                            "count": count, "expected": self.expected}
        for index in range(count):
            try:
                nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) == NVML_ERROR_GPU_IS_LOST:
                    out[f"lost:{index}"] = {"summary": f"GPU {index} is lost (NVML: {exc})",
                                            "index": index}
        return out

    def ecc(self, nvml: Any) -> dict[str, dict[str, Any]]:
        """``gpu_ecc`` conditions: volatile uncorrectable ECC errors per GPU."""
        out: dict[str, dict[str, Any]] = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                errors = int(nvml.nvmlDeviceGetTotalEccErrors(handle, UNCORRECTED, VOLATILE))
            except nvml.NVMLError:
                continue  # lost (reported above) or ECC not supported on this board
            if errors:
                out[f"gpu{index}"] = {"summary": f"GPU {index}: {errors} uncorrectable ECC "
                                      "error(s) since driver load", "index": index,
                                      "errors": errors}
        return out


def _index(nvml: Any, device: Any) -> int:
    try:
        return int(nvml.nvmlDeviceGetIndex(device))
    except (nvml.NVMLError, TypeError, ValueError):
        return -1
