"""``nvidia-smi --query-gpu=index,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,
pcie.link.width.current,pcie.link.width.max,temperature.gpu,utilization.gpu``: per GPU its
PCIe link now and at its capability, its temperature and how busy it is.

An idle GPU power-manages its link down to gen 1 (``smi_query_pcie_l40s_idle.txt``: gen 1 of
4 on eight idle L40S), so a lower generation only means downtraining on a busy GPU; a
narrower width means it at any load. Headers are optional (``noheader``) and carry the
field names when present, so a query with other columns is read by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from playbooks.parsers.common import integer, lines

FIELDS = ("index", "pci.bus_id", "pcie.link.gen.current", "pcie.link.gen.max",
          "pcie.link.width.current", "pcie.link.width.max", "temperature.gpu", "utilization.gpu")


@dataclass(frozen=True)
class PcieLink:
    index: int
    bus: str = ""
    gen: int | None = None
    gen_max: int | None = None
    width: int | None = None
    width_max: int | None = None
    temp_c: int | None = None
    util_pct: int | None = None

    @property
    def narrow(self) -> bool:
        return self.width is not None and self.width_max is not None \
            and self.width < self.width_max

    def slow(self, busy_pct: int) -> bool:
        """Below its generation while busy (an idle link drops to gen 1 by design)."""
        busy = self.util_pct is not None and self.util_pct > busy_pct
        return busy and self.gen is not None and self.gen_max is not None \
            and self.gen < self.gen_max


def parse_pcie(text: str) -> list[PcieLink]:
    rows = [[c.strip() for c in line.split(",")] for line in lines(text)]
    names = list(FIELDS)
    if rows and rows[0] and not rows[0][0].isdigit():
        names = [c.split("[", 1)[0].strip().lower() for c in rows.pop(0)]
    out = []
    for row in rows:
        cell = dict(zip(names, row, strict=False))
        index = integer(cell.get("index", ""))
        if index is None:
            continue
        out.append(PcieLink(index, cell.get("pci.bus_id", ""),
                            integer(cell.get("pcie.link.gen.current", "")),
                            integer(cell.get("pcie.link.gen.max", "")),
                            integer(cell.get("pcie.link.width.current", "")),
                            integer(cell.get("pcie.link.width.max", "")),
                            integer(cell.get("temperature.gpu", "")),
                            integer(cell.get("utilization.gpu", ""))))
    return out
