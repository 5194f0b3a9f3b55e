"""Fabric and platform in every diagnosis: the PCIe link, temperatures, clock slowdowns,
NVLink error counters and InfiniBand ports, each a verdict on its GPU or its port. Pure
over what the probes read; ``gpu_health`` runs the probes beside its own and calls here.

- PCIe: a link narrower than its capability is downtrained at any load; a lower generation
  counts only on a busy GPU (an idle GPU drops its link to gen 1 by design).
- NVLink: any recovery error, or CRC/replay errors at ``nvlink_error_warn``, per link;
  Xid 74 itself is the kernel log's (the GPU's verdict says it).
- Clocks: the slowdown reasons ``nvidia-smi -q -x`` reports active; the temperature at or
  above ``hot_c``.
- InfiniBand: a port that is not Active while its physical link is up (no subnet
  manager), or that went down since its counters were cleared, is down; a port that never
  came up is reported as unused, not as a fault; ``link_downed`` at ``ib_flap_warn`` is a
  flapping link; ``symbol_error`` at ``ib_symbol_warn`` a marginal one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core import strings as S
from bot.domain.findings import Severity
from bot.domain.headline import gpu_label
from bot.domain.xid import XidStep
from playbooks.base import PlaybookOptions, Probe, Report
from playbooks.commands import IB_COMMAND, PLATFORM_COMMAND, PLATFORM_SECTION
from playbooks.parsers.infiniband import IbPort, parse_ib
from playbooks.parsers.kernel import bus_key
from playbooks.parsers.nvidia_xml import GpuHealth
from playbooks.parsers.nvlink import NvlinkErrors, parse_nvlink_errors
from playbooks.parsers.pcie import PcieLink, parse_pcie
from playbooks.text import plural
from playbooks.verdict import GpuVerdict, GpuView

RECOVERY = "Recovery Errors"


@dataclass(frozen=True)
class Platform:
    """What the platform probes read on one host."""

    pcie: tuple[PcieLink, ...] = ()
    nvlink: tuple[NvlinkErrors, ...] = ()
    ib: tuple[IbPort, ...] = ()


def parse_platform(text: str) -> tuple[list[PcieLink], list[NvlinkErrors]]:
    head, _, tail = text.partition(PLATFORM_SECTION)
    return parse_pcie(head), parse_nvlink_errors(tail)


def platform_probes() -> dict[str, Probe[Any]]:
    return {"platform": Probe("gpu_platform", PLATFORM_COMMAND, parse_platform),
            "ib": Probe("infiniband", IB_COMMAND, parse_ib)}


def reading(got: Mapping[str, Any]) -> Platform:
    pcie, nvlink = got.get("platform") or ([], [])
    return Platform(tuple(pcie), tuple(nvlink), tuple(got.get("ib") or ()))


@dataclass(frozen=True)
class GpuIssue:
    """One platform fault on one GPU: the finding's code, its title and the grid's reason."""

    index: int | None
    code: str
    title: str
    reason: str
    evidence: Mapping[str, Any]


def _label(v: GpuView) -> str:
    return gpu_label({"index": v.index, "bus": v.bus})


def _link_of(v: GpuView, pcie: Sequence[PcieLink]) -> PcieLink | None:
    return next((p for p in pcie if (v.bus and bus_key(p.bus) == v.bus)
                 or (not p.bus and p.index == v.index)), None)


def gpu_issues(views: Sequence[GpuView], plat: Platform, xml: Sequence[GpuHealth],
               opts: PlaybookOptions) -> list[GpuIssue]:
    """Every platform fault per GPU, in grid order (pure)."""
    out: list[GpuIssue] = []
    for v in views:
        name = _label(v)
        link = _link_of(v, plat.pcie)
        if link is not None:
            out += _pcie(v, name, link, opts)
        errs = next((n for n in plat.nvlink if (v.uuid and n.uuid == v.uuid)
                     or (not v.uuid and n.index == v.index)), None)
        if errs is not None:
            out += _nvlink(v, name, errs, opts)
        health = next((h for h in xml if v.uuid and h.uuid == v.uuid), None)
        if health is not None and health.slowdowns:
            words = ", ".join(S.PLAT_SLOWDOWN_WORDS.get(r, r) for r in health.slowdowns)
            out.append(GpuIssue(v.index, "gpu.clocks_slowed",
                                S.PLAT_SLOWED.format(gpu=name, reasons=words), "",
                                {"slowdowns": list(health.slowdowns)}))
    return out


def _pcie(v: GpuView, name: str, link: PcieLink, opts: PlaybookOptions) -> list[GpuIssue]:
    out = []
    ev = {"gen": link.gen, "gen_max": link.gen_max, "width": link.width,
          "width_max": link.width_max, "util_pct": link.util_pct}
    if link.narrow:
        out.append(GpuIssue(v.index, "pcie.downtrained", S.PLAT_PCIE_NARROW.format(
            gpu=name, width=link.width, width_max=link.width_max),
            S.PLAT_PCIE_REASON_NARROW.format(width=link.width, width_max=link.width_max), ev))
    elif link.slow(opts.idle_util_pct):
        out.append(GpuIssue(v.index, "pcie.downtrained", S.PLAT_PCIE_SLOW.format(
            gpu=name, gen=link.gen, gen_max=link.gen_max, util=link.util_pct),
            S.PLAT_PCIE_REASON_SLOW.format(gen=link.gen, gen_max=link.gen_max), ev))
    if link.temp_c is not None and link.temp_c >= opts.hot_c:
        out.append(GpuIssue(v.index, "gpu.hot", S.PLAT_HOT.format(
            gpu=name, temp=link.temp_c, limit=opts.hot_c),
            S.PLAT_HOT_REASON.format(temp=link.temp_c), {"temp_c": link.temp_c,
                                                          "limit_c": opts.hot_c}))
    return out


def _nvlink(v: GpuView, name: str, errs: NvlinkErrors, opts: PlaybookOptions) -> list[GpuIssue]:
    bad = {n: c for n, c in errs.erring.items()
           if c.get(RECOVERY, 0) > 0 or max(c.values()) >= opts.nvlink_error_warn}
    if not bad:
        return []
    parts = [f"link {n}: " + ", ".join(f"{val} {k.removesuffix(' Errors')}"
                                       for k, val in sorted(c.items()))
             for n, c in sorted(bad.items())]
    links = "; ".join(parts[:4]) + (f"; {len(parts) - 4} more" if len(parts) > 4 else "")
    return [GpuIssue(v.index, "nvlink.errors", S.PLAT_NVLINK.format(gpu=name, links=links),
                     S.PLAT_NVLINK_REASON.format(links=links),
                     {"links": {str(n): c for n, c in bad.items()}})]


def mark(views: Sequence[GpuView], issues: Sequence[GpuIssue]) -> None:
    """Each GPU's platform faults as grid reasons (degraded); slowdowns are the verdict's own."""
    for issue in issues:
        view = next((v for v in views if v.index == issue.index), None)
        if view is not None and issue.reason:
            view.mark(GpuVerdict.DEGRADED, issue.reason, XidStep.INVESTIGATE)


@dataclass(frozen=True)
class PortIssue:
    port: IbPort
    code: str
    severity: Severity
    title: str


def port_issues(ports: Sequence[IbPort], opts: PlaybookOptions) -> list[PortIssue]:
    """Every InfiniBand port's verdict that is not "fine" (pure)."""
    out = []
    for p in ports:
        kind = "RoCE port" if p.link_layer.lower() == "ethernet" else "InfiniBand"
        where = {"kind": kind, "port": p.name, "state": p.state or "?",
                 "phys": p.physical_state or "?"}
        downed = p.link_downed or 0
        if not p.active and p.physical_state.lower() != "disabled":
            if p.physical_state.lower() == "linkup":
                why = S.PLAT_IB_WHY_NO_SM
            elif downed:
                why = S.PLAT_IB_WHY_DROPPED.format(downed=downed, s=plural(downed))
            else:
                out.append(PortIssue(p, "ib.port_unused", Severity.INFO,
                                     S.PLAT_IB_UNUSED.format(**where)))
                continue
            out.append(PortIssue(p, "ib.port_down", Severity.CRITICAL,
                                 S.PLAT_IB_DOWN.format(**where, why=why)))
        elif downed >= opts.ib_flap_warn:
            out.append(PortIssue(p, "ib.link_flaps", Severity.WARNING,
                                 S.PLAT_IB_FLAPS.format(**where, downed=downed)))
        if (p.symbol_error or 0) >= opts.ib_symbol_warn:
            out.append(PortIssue(p, "ib.symbol_errors", Severity.WARNING,
                                 S.PLAT_IB_SYMBOL.format(**where, errors=p.symbol_error)))
    return out


def assess(views: Sequence[GpuView], issues: Sequence[GpuIssue], plat: Platform,
           opts: PlaybookOptions, report: Report) -> None:
    """The findings: one per GPU and fault, one per port and fault."""
    for issue in issues:
        view = next((v for v in views if v.index == issue.index), None)
        gpu = {"index": issue.index, "bus": view.bus if view else "", "uuid": view.uuid if view
               else ""}
        report.find(issue.code, Severity.WARNING, issue.title, gpu=gpu, **issue.evidence)
    for p in port_issues(plat.ib, opts):
        report.find(p.code, p.severity, p.title, port={
            "ca": p.port.ca, "port": p.port.port, "state": p.port.state,
            "physical_state": p.port.physical_state, "rate": p.port.rate,
            "link_layer": p.port.link_layer, "link_downed": p.port.link_downed,
            "symbol_error": p.port.symbol_error})
