"""``nvidia-smi -q -x``: per GPU the health fields the verdicts need (ECC, retired pages,
remapped rows, slowdown reasons, persistence, PCI bus id, replays, processes).

Old drivers lack whole sections and spell fields differently (``clocks_throttle_reasons``
before 520, ``double_bit/total`` before Ampere): a missing field is ``None``, never 0.
A truncated or invalid document is an ``XmlReport`` with ``error`` set and no GPUs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from playbooks.parsers.common import integer
from playbooks.parsers.kernel import bus_key

MAX_XML_CHARS = 4_000_000
_DOCTYPE = re.compile(r"<!DOCTYPE[^>]*>", re.I)
SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
             "sw_thermal_slowdown")


@dataclass(frozen=True)
class GpuHealth:
    bus: str
    bus_id: str
    uuid: str
    name: str
    persistence: str | None = None
    ecc_uncorrected: int | None = None  # volatile (since driver load)
    retired_sbe: int | None = None
    retired_dbe: int | None = None
    retired_pending: bool | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    slowdowns: tuple[str, ...] = ()
    replays: int | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    util_pct: int | None = None
    pids: tuple[int, ...] = ()
    recovery_action: str | None = None
    fabric_state: str | None = None


@dataclass(frozen=True)
class XmlReport:
    driver_version: str | None = None
    attached: int | None = None
    gpus: list[GpuHealth] = field(default_factory=list)
    error: str | None = None  # why the document could not be read


def parse_query_xml(text: str) -> XmlReport:
    body = _DOCTYPE.sub("", text[:MAX_XML_CHARS]).strip()
    start = body.find("<nvidia_smi_log")  # error lines (a lost GPU) may come first
    body = body[start:] if start > 0 else body
    if not body:
        return XmlReport(error="empty output")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        return XmlReport(error=f"not a complete nvidia-smi XML document ({exc})")
    if root.tag != "nvidia_smi_log":
        return XmlReport(error=f"unexpected root element <{root.tag[:40]}>")
    gpus = [_gpu(g) for g in root.findall("gpu")]
    return XmlReport(_text(root, "driver_version"), integer(_text(root, "attached_gpus") or ""),
                     gpus)


def _text(node: ET.Element, path: str) -> str | None:
    found = node.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("N/A", "", "[N/A]") or value.startswith("Requested functionality") \
        else value


def _int(node: ET.Element, path: str) -> int | None:
    text = _text(node, path)
    return integer(text) if text is not None else None


def _yes(node: ET.Element, path: str) -> bool | None:
    text = _text(node, path)
    return None if text is None else text.lower() in ("yes", "true", "active")


def _gpu(g: ET.Element) -> GpuHealth:
    raw_bus = _text(g, "pci/pci_bus_id") or g.get("id") or ""
    return GpuHealth(
        bus=bus_key(raw_bus), bus_id=raw_bus, uuid=_text(g, "uuid") or "",
        name=_text(g, "product_name") or "", persistence=_text(g, "persistence_mode"),
        ecc_uncorrected=_ecc(g), retired_sbe=_int(g, "retired_pages/multiple_single_bit_"
                                                  "retirement/retired_count"),
        retired_dbe=_int(g, "retired_pages/double_bit_retirement/retired_count"),
        retired_pending=_yes(g, "retired_pages/pending_retirement"),
        remap_pending=_yes(g, "remapped_rows/remapped_row_pending"),
        remap_failure=_yes(g, "remapped_rows/remapped_row_failure"),
        slowdowns=_slowdowns(g), replays=_int(g, "pci/replay_counter"),
        memory_used_mib=_int(g, "fb_memory_usage/used"),
        memory_total_mib=_int(g, "fb_memory_usage/total"),
        util_pct=_int(g, "utilization/gpu_util"), pids=_pids(g),
        recovery_action=_text(g, "gpu_recovery_action"), fabric_state=_text(g, "fabric/state"))


def _ecc(g: ET.Element) -> int | None:
    """Volatile uncorrectable: Ampere+ ``*_uncorrectable*`` fields summed, else the
    pre-Ampere ``double_bit/total``."""
    volatile = g.find("ecc_errors/volatile")
    if volatile is None:
        return None
    legacy = _int(volatile, "double_bit/total")
    if legacy is not None:
        return legacy
    values = [integer(c.text or "") for c in volatile if "uncorrectable" in c.tag]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _slowdowns(g: ET.Element) -> tuple[str, ...]:
    reasons = g.find("clocks_event_reasons")
    if reasons is None:
        reasons = g.find("clocks_throttle_reasons")
    if reasons is None:
        return ()
    active = []
    for child in reasons:
        name = re.sub(r"^clocks_(?:event|throttle)_reason_", "", child.tag)
        if name in SLOWDOWNS and (child.text or "").strip() == "Active":
            active.append(name)
    return tuple(active)


def _pids(g: ET.Element) -> tuple[int, ...]:
    pids = [integer(p.text or "") for p in g.findall("processes/process_info/pid")]
    return tuple(p for p in pids if p is not None and p > 0)
