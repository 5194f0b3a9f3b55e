"""InfiniBand ports from ``ibstat`` and from ``/sys/class/infiniband/*/ports/*``.

``ibstat`` prints ``CA 'mlx5_0'`` blocks with ``Port N:`` sections (``State: Active``,
``Physical state: LinkUp``, ``Rate: 200``, ``Link layer: InfiniBand``), tab- or
space-indented. The sysfs part of ``playbooks.commands.IB_COMMAND`` prints one line per
port: ``PORT_DIR|STATE|PHYS_STATE|LINK_DOWNED|SYMBOL_ERROR|RATE``, where the kernel writes
state as ``4: ACTIVE`` and physical state as ``5: LinkUp`` (Documentation/ABI/stable/
sysfs-class-infiniband). Counters are cumulative since the port last came up or was
cleared: ``link_downed`` counts the times the link went down (a flap each).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from playbooks.commands import IB_SECTION as SECTION
from playbooks.parsers.common import integer

_CA = re.compile(r"^CA '(?P<ca>[^']+)'")
_PORT = re.compile(r"^Port (?P<port>\d+):")
_FIELD = re.compile(r"^(?P<key>[A-Za-z ]+):\s*(?P<value>.*)$")
_SYSFS_PORT = re.compile(r"/sys/class/infiniband/(?P<ca>[^/]+)/ports/(?P<port>\d+)/?$")


@dataclass(frozen=True)
class IbPort:
    ca: str
    port: int
    state: str = ""  # Active, Down, Initializing, Armed
    physical_state: str = ""  # LinkUp, Polling, Disabled
    rate: str = ""
    link_layer: str = ""  # InfiniBand or Ethernet (RoCE)
    link_downed: int | None = None
    symbol_error: int | None = None

    @property
    def name(self) -> str:
        return f"{self.ca} port {self.port}"

    @property
    def active(self) -> bool:
        return self.state.lower() == "active"


def parse_ibstat(text: str) -> list[IbPort]:
    ports: list[IbPort] = []
    ca = ""
    for raw in text.splitlines():
        line = raw.strip()
        if m := _CA.match(line):
            ca = m["ca"]
        elif (m := _PORT.match(line)) and ca:
            ports.append(IbPort(ca, int(m["port"])))
        elif (m := _FIELD.match(line)) and ports and raw[:1] in ("\t", " "):
            ports[-1] = _with_field(ports[-1], m["key"].strip().lower(), m["value"].strip())
    return ports


def _with_field(port: IbPort, key: str, value: str) -> IbPort:
    if key == "state":
        return replace(port, state=value)
    if key == "physical state":
        return replace(port, physical_state=value)
    if key == "rate":
        return replace(port, rate=value)
    if key == "link layer":
        return replace(port, link_layer=value)
    return port


def _after_colon(value: str) -> str:
    """``4: ACTIVE`` -> ``Active``; ``5: LinkUp`` -> ``LinkUp``."""
    word = value.split(":", 1)[-1].strip()
    return word.capitalize() if word.isupper() else word


def parse_ib_sysfs(text: str) -> list[IbPort]:
    ports = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        m = _SYSFS_PORT.search(parts[0]) if parts else None
        if m is None or len(parts) < 5:
            continue
        ports.append(IbPort(m["ca"], int(m["port"]), _after_colon(parts[1]),
                            _after_colon(parts[2]), parts[5].strip() if len(parts) > 5 else "",
                            link_downed=integer(parts[3]), symbol_error=integer(parts[4])))
    return ports


def parse_ib(text: str) -> list[IbPort]:
    """The combined probe: ``ibstat`` first (when installed), then the sysfs section; a port
    both name keeps ibstat's words and sysfs's counters."""
    head, _, tail = text.partition(SECTION)
    sysfs = {(p.ca, p.port): p for p in parse_ib_sysfs(tail)}
    merged = []
    for p in parse_ibstat(head):
        s = sysfs.pop((p.ca, p.port), None)
        merged.append(p if s is None else replace(p, link_downed=s.link_downed,
                                                  symbol_error=s.symbol_error))
    return merged + list(sysfs.values())
