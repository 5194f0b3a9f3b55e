"""The health gate run before an extraction is resumed or enqueued on a GPU host.

``evaluate`` is the pure decision; ``run_gate`` runs the gpu_health probes (plus
``dcgmi diag -r 1`` where DCGM is installed) over SSH and evaluates. A failed gate says
every reason; the caller posts ``result.message`` in the incident thread and blocks the
resume unless an approved override says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bot.core import fmt
from bot.core import strings as S
from bot.ssh.base import SSHError, SSHRunner, SSHTarget
from playbooks import gpu_health
from playbooks.base import PlaybookOptions, Probe, Session
from playbooks.commands import DCGM_DIAG_COMMAND, DCGM_MISSING
from playbooks.parsers.common import lines
from playbooks.verdict import GpuVerdict, GpuView, HealthFacts, decide

_DCGM_ROW = re.compile(r"^\|\s*(?P<name>[^|]+?)\s*\|\s*(?P<result>Fail\w*)\b", re.I)
BLOCKING = (GpuVerdict.BROKEN, GpuVerdict.WEDGED)


@dataclass(frozen=True)
class GateResult:
    host: str
    passed: bool
    reasons: list[str] = field(default_factory=list)
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def message(self) -> str:
        if self.passed:
            ok = ", ".join(k for k, v in self.checks.items() if v)
            return S.GATE_PASSED.format(host=self.host, summary=ok or "no checks")
        return S.GATE_FAILED.format(host=self.host, reasons="; ".join(self.reasons))


def dcgm_failures(text: str) -> list[str] | None:
    """Failed rows of ``dcgmi diag`` output; None when DCGM is not installed."""
    if DCGM_MISSING in text:
        return None
    return [m["name"] for m in map(_DCGM_ROW.match, lines(text)) if m]


def evaluate(host: str, facts: HealthFacts, views: list[GpuView], need_mib: int,
             dcgm: list[str] | None) -> GateResult:
    """Count, Xid, ECC, persistence, free memory, verdicts and DCGM; all reasons kept."""
    reasons: list[str] = []
    checks: dict[str, bool] = {}

    def check(name: str, failures: list[str]) -> None:
        checks[name] = not failures
        reasons.extend(failures)

    seen = len([v for v in views if not (v.reasons and v.reasons[0].startswith("missing:"))])
    check("gpu count", [] if facts.expected is None or seen == facts.expected else
          [S.GATE_CHECK_COUNT.format(seen=seen, expected=facts.expected)])
    check("nvidia-smi", [S.GATE_CHECK_TOOL.format(quote=e.quote) for e in facts.smi])
    bad_xid = sorted({e.bus for e in facts.kernel.xids if facts.policy.rule(e.xid).breaks_gpu})
    check("no critical Xid", [S.GATE_CHECK_XID.format(gpus=", ".join(bad_xid))] if bad_xid else [])
    ecc = [h.bus for h in facts.xml if h.ecc_uncorrected]
    check("no uncorrectable ECC", [S.GATE_CHECK_ECC.format(gpus=", ".join(ecc))] if ecc else [])
    off = [h.bus for h in facts.xml if h.persistence == "Disabled"]
    check("persistence on", [S.GATE_CHECK_PERSISTENCE.format(gpus=", ".join(off))] if off else [])
    check("free memory", _memory(views, need_mib))
    check("verdicts", [S.GATE_CHECK_VERDICT.format(gpu=_name(v), verdict=v.verdict.value)
                       for v in views if v.verdict in BLOCKING])
    if dcgm is not None:
        check("dcgmi diag -r 1", [S.GATE_CHECK_DCGM.format(line=x) for x in dcgm])
    return GateResult(host, not reasons, reasons, checks)


def _memory(views: list[GpuView], need_mib: int) -> list[str]:
    out = []
    for v in views:
        if v.memory_total_mib is None or v.memory_used_mib is None or not need_mib:
            continue
        free = v.memory_total_mib - v.memory_used_mib
        if free < need_mib:
            out.append(S.GATE_CHECK_MEMORY.format(gpu=_name(v), free=fmt.gib(free),
                                                  need=fmt.gib(need_mib)))
    return out


def _name(v: GpuView) -> str:
    return "?" if v.index is None else str(v.index)


def run_gate(runner: SSHRunner, target: SSHTarget, *, need_mib: int = 0,
             options: PlaybookOptions | None = None) -> GateResult:
    """Probe ``target`` and evaluate; an unreachable host fails the gate (never raises)."""
    opts = options or PlaybookOptions()
    with ThreadPoolExecutor(8, thread_name_prefix=f"gate-{target.name}") as ex:
        session = Session(runner, target, opts, ex)
        try:
            dcgm = session.submit(Probe("dcgm_diag", DCGM_DIAG_COMMAND, dcgm_failures,
                                        timeout_s=max(opts.command_timeout_s, 120.0)))
            facts, _ = gpu_health.gather(session)
            dcgm_result = dcgm.result()[1]
        except SSHError as exc:
            return GateResult(target.name, False, [f"{target.name} unreachable: {exc}"])
    return evaluate(target.name, facts, decide(facts), need_mib, dcgm_result)


@dataclass(frozen=True)
class Gated:
    """A resume behind the gate: what the gate said, whether the resume ran, its result."""

    gate: GateResult
    ran: bool
    result: object = None
    override_by: str | None = None


def gated(gate: GateResult, resume: Callable[[], object], *,
          override_by: str | None = None) -> Gated:
    """Run ``resume`` only when the gate passed, or when an approver overrode it (the
    caller gets that approval like any other action's: the override is never implicit)."""
    if gate.passed or override_by:
        return Gated(gate, True, resume(), override_by if not gate.passed else None)
    return Gated(gate, False)
