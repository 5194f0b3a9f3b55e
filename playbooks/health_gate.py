"""The graded health gate: what must hold before a GPU host goes back to work (a Slurm
resume, an incident closed as fixed after a reset or a reboot, an extraction resumed).

Three levels, run in order; each is recorded with its duration and its evidence, and a
failed level keeps the host out (the later ones are not run):

1. ``readings``: the GPU view read once more (``gpu_health``'s probes with the platform's):
   no new Xid since the repair (only Xids of the GPU's fault; every critical one since
   boot when there was no repair), no volatile uncorrectable ECC, no pending or failed row
   remap, retired pages under the threshold, the PCIe link at its width, no clock
   slowdown, the expected GPU count, Fabric Manager active where the host has NVSwitches,
   no broken or wedged GPU, the memory a resumed job needs.
2. ``dcgm``: ``dcgmi diag -r N -j`` for each configured N (1, then 2), its JSON parsed.
3. ``smoke``: ``playbooks/smoke/gpu_smoke.py`` through the host's own torch (a matmul, a
   device memory sweep, a host-to-device copy on every GPU), each figure compared with the
   node's own last good run.

A level whose tool is not on the host (no ``dcgmi``, no torch) is ``absent``: it says so
and blocks only when the policy requires it. A level that could not run (a timeout, an
unreadable answer, torch that sees no GPU) blocks: the gate never passes on what it did
not see. ``run_gate`` does the I/O; the judges (``readings``, ``judge_dcgm``,
``judge_smoke``) are pure.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bot.core import fmt
from bot.core import strings as S
from bot.domain.findings import ProbeResult
from bot.domain.xid import Fault
from bot.ssh.base import SSHError, SSHRunner, SSHTarget
from playbooks import gpu_health
from playbooks.base import PlaybookOptions, Probe, Session
from playbooks.commands import DCGM_MISSING, GATE_KERNEL_COMMAND, dcgm_json_command
from playbooks.parsers.common import lines
from playbooks.parsers.dcgm import DcgmDiag, failure_lines, parse_diag_json
from playbooks.parsers.host import parse_clock
from playbooks.parsers.kernel import XidEvent, parse_kernel_log
from playbooks.parsers.kernel_time import line_epoch
from playbooks.parsers.smoke import SmokeGpu, SmokeReport, parse_smoke
from playbooks.platform import GpuIssue
from playbooks.smoke import MARKER, script_text
from playbooks.verdict import GpuVerdict, GpuView, HealthFacts

_DCGM_ROW = re.compile(r"^\|\s*(?P<name>[^|]+?)\s*\|\s*(?P<result>Fail\w*)\b", re.I)
BLOCKING = (GpuVerdict.BROKEN, GpuVerdict.WEDGED)
HEREDOC = "INCIDENT_BOT_SMOKE_EOF"
SMOKE_FIGURES = (("matmul_tflops", "matmul", "TFLOPS"), ("mem_gbps", "memory sweep", "GB/s"),
                 ("h2d_gbps", "host-to-device copy", "GB/s"))


class GateLevel(StrEnum):
    READINGS = "readings"
    DCGM = "dcgm"
    SMOKE = "smoke"

    @property
    def number(self) -> int:
        return list(GateLevel).index(self) + 1


class LevelStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ABSENT = "absent"  # its tool is not on the host: said, blocks only where required
    COULD_NOT_RUN = "could_not_run"  # timed out, unreadable, no GPU seen: blocks
    NOT_REACHED = "not_reached"  # an earlier level failed


@dataclass(frozen=True)
class GatePolicy:
    """Which levels a host group's gate runs and how (``extra.gate`` in the config)."""

    levels: tuple[GateLevel, ...] = (GateLevel.READINGS, GateLevel.DCGM, GateLevel.SMOKE)
    required: frozenset[GateLevel] = frozenset({GateLevel.READINGS})
    dcgm_runs: tuple[int, ...] = (1, 2)
    dcgm_timeout_s: Mapping[int, float] = field(
        default_factory=lambda: {1: 180.0, 2: 600.0, 3: 2400.0, 4: 7200.0})
    smoke_python: str = "python3"
    smoke_matmul_n: int = 8192
    smoke_iters: int = 20
    smoke_mem_fraction: float = 0.8
    smoke_timeout_s: float = 600.0
    smoke_min_ratio: float = 0.8  # a figure under this share of the last good run fails
    retired_pages_max: int = 60


@dataclass(frozen=True)
class LevelResult:
    level: GateLevel
    status: LevelStatus
    duration_s: float = 0.0
    reasons: tuple[str, ...] = ()
    checks: Mapping[str, bool] = field(default_factory=dict)
    evidence: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level.value, "number": self.level.number,
                "status": self.status.value, "duration_s": round(self.duration_s, 3),
                "reasons": list(self.reasons), "checks": dict(self.checks),
                "evidence": dict(self.evidence)}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> LevelResult:
        return cls(GateLevel(raw["level"]), LevelStatus(raw["status"]),
                   float(raw.get("duration_s") or 0.0), tuple(raw.get("reasons") or ()),
                   {str(k): bool(v) for k, v in (raw.get("checks") or {}).items()},
                   dict(raw.get("evidence") or {}))

    @property
    def words(self) -> str:
        """``2 dcgm passed (1.2 s)``: how the thread names a level's outcome."""
        took = f" ({fmt.duration(self.duration_s)})" if self.status not in (
            LevelStatus.NOT_REACHED,) else ""
        return S.GATE_LEVEL_WORDS.format(n=self.level.number, level=self.level.value,
                                         status=S.GATE_STATUS_WORDS[self.status.value],
                                         took=took)


@dataclass(frozen=True)
class GateResult:
    host: str
    levels: tuple[LevelResult, ...] = ()
    required: frozenset[GateLevel] = frozenset({GateLevel.READINGS})
    smoke: tuple[SmokeGpu, ...] = ()  # the figures a passed gate keeps as the node's baseline
    kept_out: str = ""  # why the node stays out whatever the levels say (the RMA list)

    @property
    def passed(self) -> bool:
        """Every configured level passed, or its tool is absent and the level not required;
        and nothing keeps the node out."""
        return not self.kept_out and bool(self.levels) and all(
            r.status is LevelStatus.PASSED
            or (r.status is LevelStatus.ABSENT and r.level not in self.required)
            for r in self.levels)

    @property
    def reached(self) -> int:
        """The last level that passed in order, past levels whose tool is absent and that
        are not required (0: none passed)."""
        n = 0
        for r in self.levels:
            if r.status is LevelStatus.PASSED:
                n = r.level.number
            elif not (r.status is LevelStatus.ABSENT and r.level not in self.required):
                break
        return n

    @property
    def reasons(self) -> list[str]:
        kept = [self.kept_out] if self.kept_out else []
        return kept + [reason for r in self.levels for reason in r.reasons]

    @property
    def checks(self) -> dict[str, bool]:
        return {k: v for r in self.levels for k, v in r.checks.items()}

    @property
    def duration_s(self) -> float:
        return sum(r.duration_s for r in self.levels)

    @property
    def summary(self) -> str:
        """``reached level 3: 1 readings passed (0.4 s); 2 dcgm not installed; 3 smoke …``."""
        return S.GATE_LEVELS.format(reached=self.reached,
                                    levels="; ".join(r.words for r in self.levels))

    @property
    def message(self) -> str:
        if self.passed:
            ok = ", ".join(k for k, v in self.checks.items() if v)
            return S.GATE_PASSED.format(host=self.host, summary=ok or "no checks") + \
                f". {self.summary}"
        return S.GATE_FAILED.format(host=self.host, reasons="; ".join(self.reasons)) + \
            f" {self.summary}"

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "passed": self.passed, "reached": self.reached,
                "kept_out": self.kept_out, "levels": [r.to_json() for r in self.levels]}


def dcgm_failures(text: str) -> list[str] | None:
    """Failed rows of ``dcgmi diag``'s text table (no ``-j``); None when DCGM is not installed."""
    if DCGM_MISSING in text:
        return None
    return [m["name"] for m in map(_DCGM_ROW.match, lines(text)) if m]


# --- level 1: readings (pure) ------------------------------------------------------------

@dataclass(frozen=True)
class Readings:
    """What the readings level judges: the GPU view's facts, verdicts and platform faults,
    the kernel log read with exact times, the host's clock and Fabric Manager's state."""

    facts: HealthFacts
    views: list[GpuView]
    issues: list[GpuIssue]
    fabric_state: str = ""
    kernel_text: str = ""
    boot_epoch: float | None = None
    seen_total: int | None = None  # every GPU row seen, when ``views`` is a scope of them


def new_xids(xids: Sequence[XidEvent], since: float, boot_epoch: float | None) -> list[XidEvent]:
    """Xids written after ``since`` (an unknown time counts as new)."""
    return [e for e in xids if (t := line_epoch(e.line, boot_epoch)) is None or t > since]


def readings(host: str, r: Readings, *, need_mib: int, since: float | None,
             policy: GatePolicy, duration_s: float = 0.0) -> LevelResult:
    """Level 1 over what was read (pure): every check, every reason kept."""
    f = r.facts
    reasons: list[str] = []
    checks: dict[str, bool] = {}

    def check(name: str, failures: list[str]) -> None:
        checks[name] = not failures
        reasons.extend(failures)

    seen = r.seen_total if r.seen_total is not None else len(
        [v for v in r.views if not (v.reasons and v.reasons[0].startswith("missing:"))])
    check("gpu count", [] if f.expected is None or seen == f.expected else
          [S.GATE_CHECK_COUNT.format(seen=seen, expected=f.expected)])
    check("nvidia-smi", [S.GATE_CHECK_TOOL.format(quote=e.quote) for e in f.smi])
    if since is None:
        bad = sorted({e.bus for e in f.kernel.xids if f.policy.rule(e.xid).breaks_gpu})
        check("no critical Xid", [S.GATE_CHECK_XID.format(gpus=", ".join(bad))] if bad else [])
    else:
        timed = parse_kernel_log(r.kernel_text).xids if r.kernel_text else list(f.kernel.xids)
        fresh = [e for e in new_xids(timed, since, r.boot_epoch)
                 if f.policy.rule(e.xid).fault is not Fault.APP]
        check("no new Xid since the repair", [S.GATE_CHECK_XID_SINCE.format(
            xids=", ".join(sorted({str(e.xid) for e in fresh})),
            gpus=", ".join(sorted({e.bus for e in fresh})), at=fmt.clock(since))]
              if fresh else [])
    ecc = [h.bus for h in f.xml if h.ecc_uncorrected]
    check("no uncorrectable ECC", [S.GATE_CHECK_ECC.format(gpus=", ".join(ecc))] if ecc else [])
    check("rows and pages", _rows_and_pages(f, policy))
    off = [h.bus for h in f.xml if h.persistence == "Disabled"]
    check("persistence on", [S.GATE_CHECK_PERSISTENCE.format(gpus=", ".join(off))] if off else [])
    check("PCIe link at capability", [i.title for i in r.issues if i.code == "pcie.downtrained"])
    check("no clock slowdown", [i.title for i in r.issues if i.code == "gpu.clocks_slowed"])
    if any(h.fabric_state for h in f.xml):
        state = r.fabric_state.strip() or "unknown"
        check("Fabric Manager active", [] if state == "active" else
              [S.GATE_CHECK_FABRIC.format(state=state[:40])])
    check("free memory", _memory(r.views, need_mib))
    check("verdicts", [S.GATE_CHECK_VERDICT.format(gpu=_name(v), verdict=v.verdict.value)
                       for v in r.views if v.verdict in BLOCKING])
    status = LevelStatus.FAILED if reasons else LevelStatus.PASSED
    return LevelResult(GateLevel.READINGS, status, duration_s, tuple(reasons), checks,
                       {"gpus": len(r.views), "since": since})


def _rows_and_pages(f: HealthFacts, policy: GatePolicy) -> list[str]:
    out = []
    for h in f.xml:
        if h.remap_failure:
            out.append(S.GATE_CHECK_REMAP_FAILED.format(gpu=h.bus))
        elif h.remap_pending:
            out.append(S.GATE_CHECK_REMAP_PENDING.format(gpu=h.bus))
        retired = (h.retired_sbe or 0) + (h.retired_dbe or 0)
        if h.retired_pending or retired >= policy.retired_pages_max:
            out.append(S.GATE_CHECK_RETIRED.format(gpu=h.bus, n=retired,
                                                   limit=policy.retired_pages_max))
    return out


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


# --- level 2: dcgmi diag (pure) ----------------------------------------------------------

def judge_dcgm(runs: Sequence[tuple[int, ProbeResult, DcgmDiag]],
               duration_s: float = 0.0) -> LevelResult:
    """Each ``dcgmi diag -r N -j`` run in order; the first that fails or cannot say ends it."""
    done: list[dict[str, Any]] = []
    checks: dict[str, bool] = {}
    for level, result, diag in runs:
        name = f"dcgmi diag -r {level}"
        ev = {"run": level, "version": diag.version, "tests": len(diag.tests),
              "failed": failure_lines(diag)[:20],
              "warnings": [w for t in diag.tests for w in t.warnings][:20]}
        done.append(ev)
        if not diag.installed or result.exit_status == 127:
            return LevelResult(GateLevel.DCGM, LevelStatus.ABSENT, duration_s,
                               (S.GATE_DCGM_ABSENT,), {}, {"runs": done})
        if result.timed_out or diag.error is not None:
            why = (S.GATE_TIMED_OUT.format(secs=round(result.duration_s, 1)) if result.timed_out
                   else diag.error or "?")
            return LevelResult(GateLevel.DCGM, LevelStatus.COULD_NOT_RUN, duration_s,
                               (S.GATE_DCGM_COULD_NOT.format(command=name, why=why),), checks,
                               {"runs": done})
        checks[name] = diag.passed
        if not diag.passed:
            return LevelResult(GateLevel.DCGM, LevelStatus.FAILED, duration_s, tuple(
                S.GATE_CHECK_DCGM_FAILED.format(command=name, line=line)
                for line in failure_lines(diag)), checks, {"runs": done})
    return LevelResult(GateLevel.DCGM, LevelStatus.PASSED, duration_s, (), checks,
                       {"runs": done})


# --- level 3: the CUDA smoke (pure) ------------------------------------------------------

def smoke_command(policy: GatePolicy) -> str:
    """``python3 - --incident-bot-smoke ARGS`` with the script as a here-document: nothing is
    copied to or installed on the host; every argument quoted."""
    args = [policy.smoke_python, "-", MARKER, "--matmul-n", str(int(policy.smoke_matmul_n)),
            "--iters", str(int(policy.smoke_iters)),
            "--mem-fraction", f"{float(policy.smoke_mem_fraction):g}"]
    body = script_text()
    if HEREDOC in body:  # pragma: no cover - the script is ours
        raise ValueError("the smoke script contains its own here-document delimiter")
    return f"{shlex.join(args)} <<'{HEREDOC}'\n{body}\n{HEREDOC}"


def judge_smoke(result: ProbeResult, report: SmokeReport, baseline: Mapping[str, SmokeGpu],
                expected: int | None, policy: GatePolicy, duration_s: float = 0.0
                ) -> LevelResult:
    """Every GPU ran clean and kept at least ``smoke_min_ratio`` of its last good figures."""
    ev: dict[str, Any] = {"gpus": [g.to_json() for g in report.gpus], "torch": report.torch,
                          "baseline": {k: v.to_json() for k, v in baseline.items()}}
    if result.exit_status == 127 or (report.error and "not importable" in report.error):
        return LevelResult(GateLevel.SMOKE, LevelStatus.ABSENT, duration_s,
                           (S.GATE_SMOKE_ABSENT.format(why=report.error or "python3 not found"),),
                           {}, ev)
    if report.error or result.timed_out or not report.done:
        why = report.error or (S.GATE_TIMED_OUT.format(secs=round(result.duration_s, 1))
                               if result.timed_out else S.GATE_SMOKE_CUT)
        return LevelResult(GateLevel.SMOKE, LevelStatus.COULD_NOT_RUN, duration_s,
                           (S.GATE_SMOKE_COULD_NOT.format(why=why),), {}, ev)
    reasons = [S.GATE_SMOKE_ERROR.format(gpu=g.gpu, error=e) for g in report.gpus for e in g.errors]
    if expected is not None and len(report.gpus) < expected:
        reasons.append(S.GATE_SMOKE_COUNT.format(seen=len(report.gpus), expected=expected))
    for g in report.gpus:
        reasons += _slower(g, baseline.get(g.key), policy.smoke_min_ratio)
    status = LevelStatus.FAILED if reasons else LevelStatus.PASSED
    return LevelResult(GateLevel.SMOKE, status, duration_s, tuple(reasons),
                       {"CUDA smoke": not reasons}, ev)


def _slower(g: SmokeGpu, good: SmokeGpu | None, ratio: float) -> list[str]:
    if good is None:
        return []
    out = []
    for attr, what, unit in SMOKE_FIGURES:
        now, then = getattr(g, attr), getattr(good, attr)
        if now is not None and then and now < ratio * then:
            out.append(S.GATE_SMOKE_SLOWER.format(gpu=g.gpu, what=what, now=f"{now:g}",
                                                  unit=unit, pct=round(100 * now / then),
                                                  then=f"{then:g}"))
    return out


# --- the runner --------------------------------------------------------------------------

def run_gate(runner: SSHRunner, target: SSHTarget, *, need_mib: int = 0,
             options: PlaybookOptions | None = None, policy: GatePolicy | None = None,
             since: float | None = None, baseline: Mapping[str, SmokeGpu] | None = None,
             only: Collection[int] | None = None,
             clock: Callable[[], float] = time.monotonic) -> GateResult:
    """Run ``policy``'s levels on ``target`` in order and judge each (never raises: an
    unreachable host fails the level it was at). ``only``: the GPUs a repair touched
    (one GPU's reset): the readings judge those GPUs, and the host's count and fabric."""
    opts = options or PlaybookOptions()
    pol = policy or GatePolicy()
    done: list[LevelResult] = []
    smoke: tuple[SmokeGpu, ...] = ()
    with ThreadPoolExecutor(8, thread_name_prefix=f"gate-{target.name}") as ex:
        session = Session(runner, target, opts, ex)
        for level in pol.levels:
            stop = (LevelStatus.FAILED, LevelStatus.COULD_NOT_RUN)
            if any(r.status in stop or (r.status is LevelStatus.ABSENT and r.level in pol.required)
                   for r in done):
                done.append(LevelResult(level, LevelStatus.NOT_REACHED))
                continue
            start = clock()
            try:
                result, gpus = _run_level(level, session, pol, need_mib=need_mib, since=since,
                                          baseline=baseline or {}, only=only)
            except SSHError as exc:
                result, gpus = LevelResult(level, LevelStatus.COULD_NOT_RUN, reasons=(
                    S.GATE_UNREACHABLE.format(host=target.name, why=str(exc)),)), ()
            done.append(replace(result, duration_s=clock() - start))
            smoke = gpus or smoke
    return GateResult(target.name, tuple(done), pol.required, smoke)


def _run_level(level: GateLevel, session: Session, policy: GatePolicy, *, need_mib: int,
               since: float | None, baseline: Mapping[str, SmokeGpu],
               only: Collection[int] | None = None
               ) -> tuple[LevelResult, tuple[SmokeGpu, ...]]:
    if level is GateLevel.READINGS:
        return _readings(session, policy, need_mib, since, only), ()
    if level is GateLevel.DCGM:
        runs = []
        for n in policy.dcgm_runs:
            probe = Probe(f"dcgm_diag_r{n}", dcgm_json_command(n), parse_diag_json,
                          timeout_s=policy.dcgm_timeout_s.get(n, 600.0))
            result, diag = session.run(probe)
            runs.append((n, result, diag))
            if not diag.passed:
                break
        return judge_dcgm(runs), ()
    smoke = Probe("gpu_smoke", smoke_command(policy), parse_smoke,
                  timeout_s=policy.smoke_timeout_s)
    ran, report = session.run(smoke)
    judged = judge_smoke(ran, report, baseline, session.options.expected_gpus, policy)
    return judged, tuple(report.gpus) if judged.status is LevelStatus.PASSED else ()


def _readings(session: Session, policy: GatePolicy, need_mib: int,
              since: float | None, only: Collection[int] | None = None) -> LevelResult:
    extra = session.submit_many({"kernel": Probe("gate_kernel_log", GATE_KERNEL_COMMAND, str),
                                 "clock": Probe("clock", "date '+%s %z'; uptime -s", str)})
    facts, got = gpu_health.gather(session)
    text = Session.parsed(extra)
    clock = parse_clock(text["clock"])
    boot = clock[1] if clock else None
    if since is not None:  # judge the GPUs on what happened after the repair only
        fresh = new_xids(parse_kernel_log(text["kernel"]).xids, since, boot)
        keep = {e.line.split("NVRM:", 1)[-1] for e in fresh}
        kernel = replace(facts.kernel, xids=[e for e in facts.kernel.xids
                                             if e.line.split("NVRM:", 1)[-1] in keep])
        facts = replace(facts, kernel=kernel)
    views, issues = gpu_health.judge(facts, got, session.options)
    reading = Readings(facts, views, issues, str(got.get("fabric") or ""), text["kernel"], boot)
    return readings(session.target.name, scoped(reading, only) if only is not None else reading,
                    need_mib=need_mib, since=since, policy=policy)


def scoped(r: Readings, only: Collection[int]) -> Readings:
    """The readings of the GPUs in ``only`` (their rows, their XML, their Xids); the
    count keeps every row, so a GPU that vanished still fails it."""
    mine = [v for v in r.views if v.index in only]
    buses = {v.bus for v in mine if v.bus}
    uuids = {v.uuid for v in mine if v.uuid}
    seen = len([v for v in r.views if not (v.reasons and v.reasons[0].startswith("missing:"))])
    kernel = replace(r.facts.kernel, xids=[e for e in r.facts.kernel.xids if e.bus in buses])
    facts = replace(r.facts, xml=[h for h in r.facts.xml if h.uuid in uuids], kernel=kernel,
                    smi=[e for e in r.facts.smi if not e.bus or e.bus in buses])
    text = "\n".join(line for line in r.kernel_text.splitlines()
                     if "NVRM: Xid" not in line or any(b.split(":", 1)[-1] in line.lower()
                                                        for b in buses))
    counted = replace(facts, expected=None) if r.facts.expected is None else facts
    return Readings(counted, mine, [i for i in r.issues if i.index in only], r.fabric_state,
                    text, r.boot_epoch, seen_total=seen)


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
