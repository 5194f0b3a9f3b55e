"""Kernel log lines from the NVIDIA driver (``journalctl -k``, ``dmesg``, syslog): Xid
events, "fallen off the bus" without an Xid, API (driver/library) mismatches and
adapter init failures. Tolerant of every prefix seen on real hosts: ``[  12.3]``,
``[Fri Aug 30 11:43:09 2024]``, ``Mon DD HH:MM:SS host kernel:``, syslog's ``#012``.

A log the reader may not read is the tool's error (``KernelReport.error``), never an
empty log: "dmesg: read kernel buffer failed: Operation not permitted" has seen no Xid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BUS = re.compile(r"^(?:(?P<dom>[0-9A-Fa-f]{1,8}):)?(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})"
                  r"(?:\.[0-7])?$")
_XID = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<xid>\d{1,4}),\s*(?P<rest>.*)")
_PID = re.compile(r"pid='?(?P<pid><unknown>|\d+)'?,\s*name=(?P<name>[^,]*),\s*(?P<detail>.*)")
_FALLEN = re.compile(r"NVRM: The NVIDIA GPU (?P<bus>[0-9A-Fa-f:.]+)")
_API = re.compile(r"API mismatch: the client (?:'(?P<client>[^']*)' \(pid \d+\)\s+)?has the "
                  r"version (?P<client_v>[0-9]+(?:\.[0-9]+)*), but\s+this kernel module has\s+the "
                  r"version (?P<kernel_v>[0-9]+(?:\.[0-9]+)*)")
_UNBOUND = re.compile(r"NVRM: (?:No NVIDIA (?:graphics adapter|GPU) (?:probed|found)|The NVIDIA "
                      r"probe routine was not called for \d+ device)", re.I)
_INIT = re.compile(r"NVRM: GPU (?P<bus>[0-9A-Fa-f:.]+): RmInitAdapter failed! \((?P<code>[^)]*)\)")
_NVRM_TEXT = re.compile(r"NVRM:\s?(?P<text>.*)$")
# the reader's own complaint (dmesg, journalctl), not a kernel line that mentions one
_UNREAD = re.compile(r"^(?:dmesg|journalctl): .*(?:not permitted|denied|failed)|"
                     r"^No journal files were opened due to insufficient permissions", re.I)


def bus_key(text: str) -> str:
    """Any PCI address spelling -> ``dddd:bb:dd`` lower-case: nvidia-smi's
    ``00000000:3B:00.0`` and the kernel's ``0000:3b:00`` name the same GPU."""
    m = _BUS.match(text.strip())
    if not m:
        return text.strip().lower()
    dom = int(m["dom"] or "0", 16)
    return f"{dom:04x}:{m['bus'].lower()}:{m['dev'].lower()}"


@dataclass(frozen=True)
class XidEvent:
    bus: str  # bus_key
    xid: int
    pid: int | None
    process: str
    detail: str
    line: str


@dataclass(frozen=True)
class ApiMismatch:
    client_version: str  # the user-space library (what nvidia-smi links)
    kernel_version: str  # the loaded kernel module
    client: str = ""


@dataclass(frozen=True)
class KernelReport:
    xids: list[XidEvent]
    mismatches: list[ApiMismatch]
    init_failures: list[tuple[str, str]]  # (bus, code)
    error: str | None = None  # the reader could not read the log: its own words
    unbound: list[str] = field(default_factory=list)  # the driver bound no GPU: NVRM's words


def parse_kernel_log(text: str) -> KernelReport:
    raw = text.replace("#012", "\n").splitlines()
    xids = [e for e in (_xid(line) for line in raw) if e is not None]
    xids += _fallen(raw, {e.bus for e in xids if e.xid == 79})
    flat = " ".join(m["text"].strip() for m in map(_NVRM_TEXT.search, raw) if m)
    flat = " ".join(line.strip() for line in raw) if "API mismatch" not in flat else flat
    mismatches = [ApiMismatch(m["client_v"], m["kernel_v"], m["client"] or "")
                  for m in _API.finditer(re.sub(r"\s+", " ", flat))]
    inits = [(bus_key(m["bus"]), m["code"]) for m in map(_INIT.search, raw) if m]
    unread = next((line.strip() for line in raw if _UNREAD.search(line.strip())), None)
    unbound = [m.string[m.start():].strip() for m in map(_UNBOUND.search, raw) if m]
    return KernelReport(xids, _unique(mismatches), inits, unread, list(dict.fromkeys(unbound)))


def _xid(line: str) -> XidEvent | None:
    m = _XID.search(line)
    if not m:
        return None
    rest = m["rest"].strip()
    pid_m = _PID.match(rest)
    pid = int(pid_m["pid"]) if pid_m and pid_m["pid"].isdigit() else None
    process = pid_m["name"].strip() if pid_m else ""
    detail = pid_m["detail"].strip() if pid_m else rest
    return XidEvent(bus_key(m["bus"]), int(m["xid"]), pid, process, detail[:300],
                    line.strip()[:500])


def _fallen(raw: list[str], already: set[str]) -> list[XidEvent]:
    """"The NVIDIA GPU X ... has fallen off the bus" (newer drivers, no Xid line) as 79."""
    out: list[XidEvent] = []
    for i, line in enumerate(raw):
        m = _FALLEN.search(line)
        if not m or not any("fallen off the bus" in x for x in raw[i:i + 4]):
            continue
        bus = bus_key(m["bus"])
        if bus not in already and all(e.bus != bus for e in out):
            out.append(XidEvent(bus, 79, None, "", "fallen off the bus (no Xid line)",
                                line.strip()[:500]))
    return out


def _unique(items: list[ApiMismatch]) -> list[ApiMismatch]:
    seen: list[ApiMismatch] = []
    for item in items:
        if all((s.client_version, s.kernel_version) != (item.client_version, item.kernel_version)
               for s in seen):
            seen.append(item)
    return seen
