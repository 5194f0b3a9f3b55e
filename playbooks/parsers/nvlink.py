"""``nvidia-smi nvlink -e``: per GPU and link, the error counters since the driver loaded.

Lines look like ``Link 0: Replay Errors: 0`` under a ``GPU 0: NAME (UUID: GPU-…)`` header;
newer drivers add counters (``CRC Data Errors``, ``Rx Errors``…) in the same shape. Elisions
people paste (``[...]``) and blank lines are skipped. A counter that reads ``N/A`` is absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?)\s*\(UUID: (?P<uuid>[^)]+)\)\s*$")
_LINK = re.compile(r"^Link (?P<link>\d+): (?P<counter>[A-Za-z][A-Za-z /-]*?)\s*: "
                   r"(?P<value>\S+)\s*$")


@dataclass
class NvlinkErrors:
    """One GPU's link counters: ``{link: {"Replay Errors": 0, "CRC Errors": 3}}``."""

    index: int
    uuid: str
    name: str
    links: dict[int, dict[str, int]] = field(default_factory=dict)

    def total(self, link: int) -> int:
        return sum(self.links.get(link, {}).values())

    @property
    def erring(self) -> dict[int, dict[str, int]]:
        """Links with any counter above zero."""
        return {n: {k: v for k, v in c.items() if v} for n, c in self.links.items()
                if any(c.values())}


def parse_nvlink_errors(text: str) -> list[NvlinkErrors]:
    gpus: list[NvlinkErrors] = []
    for raw in text.splitlines():
        line = raw.strip()
        head = _GPU.match(line)
        if head:
            gpus.append(NvlinkErrors(int(head["index"]), head["uuid"].strip(), head["name"]))
            continue
        m = _LINK.match(line)
        if m and gpus and m["value"].isdigit():
            gpus[-1].links.setdefault(int(m["link"]), {})[m["counter"]] = int(m["value"])
    return gpus
