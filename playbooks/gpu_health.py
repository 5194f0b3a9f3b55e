"""gpu_health: a verdict for every GPU (busy, held_idle, free, wedged, broken, degraded)
from the sampled utilization, ``nvidia-smi -q -x``, the kernel log's Xid lines, the
process table and the inventory's expected count.

The step its verdicts call for (restart the app, reset the GPU, reboot, drain and open a
ticket) is said by ``playbooks/gpu_view.py``, which proposes the ones an action takes (a
reset, a reboot) and words the rest as a person's: it never proposes stopping a unit for
a hardware fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from bot.core import strings as S
from bot.domain.findings import ProbeResult, Severity
from bot.domain.headline import gpu_label
from playbooks import device_clients, platform, probes
from playbooks.base import PlaybookOptions, Probe, Report, Session
from playbooks.commands import FABRIC_MANAGER_COMMAND, KERNEL_LOG_COMMAND
from playbooks.gpu import summarize
from playbooks.parsers import kernel, nvidia, ps, smi_errors, systemd
from playbooks.parsers.smi_errors import SmiError, SmiErrorKind
from playbooks.text import plural
from playbooks.verdict import (
    RANK,
    GpuVerdict,
    GpuView,
    HealthFacts,
    counts,
    decide,
    grid,
    host_error,
)

NAME = "gpu_health"
DESCRIPTION = "a verdict per GPU from Xid, ECC, NVML errors, processes and the inventory"


def health_probes() -> dict[str, Probe[Any]]:
    return {"xml": probes.gpu_xml(),
            "kernel": Probe("kernel_log", KERNEL_LOG_COMMAND, kernel.parse_kernel_log),
            "apps": probes.compute_apps(), "devs": probes.gpu_device_users(),
            "procs": Probe("process_states", f"ps -eo pid=,stat=,comm= && echo {ps.SECTION} && "
                           "ps -eo pid=,cgroup=", _states_and_units),
            "fabric": Probe("fabric_manager", FABRIC_MANAGER_COMMAND, str.strip),
            "containers": device_clients.docker_names(),
            "services": probes.units(),
            **platform.platform_probes()}


@dataclass(frozen=True)
class Pending:
    """The health probes in flight: started before a playbook's own, collected after."""

    samples: Future[tuple[ProbeResult, Any]]
    others: dict[str, Future[tuple[ProbeResult, Any]]]
    options: PlaybookOptions


def start(session: Session) -> Pending:
    """Submit every health probe (the sampler first: its window is the diagnosis' floor);
    returns at once, so the caller's own probes run in parallel on the same connection."""
    samples = session.submit(probes.gpu_samples(session.options))
    return Pending(samples, session.submit_many(health_probes()), session.options)


def gather(session: Session) -> tuple[HealthFacts, dict[str, Any]]:
    """Run every health probe in parallel; the facts and the raw parsed values."""
    return collect(start(session))


def collect(pending: Pending) -> tuple[HealthFacts, dict[str, Any]]:
    """Wait for the health probes and reduce them to ``HealthFacts``."""
    got = Session.parsed(pending.others)
    servers = active_servers(got.pop("services"))
    got["stat"], got["units"] = got.pop("procs")
    result, parsed = pending.samples.result()
    opts = pending.options
    got["smi"] = _smi(result, opts.window_s + opts.command_timeout_s)
    stats = summarize(nvidia.samples_of(parsed))
    states: dict[int, tuple[str, str]] = got["stat"]
    holders: dict[str, list[int]] = {}
    stuck: dict[str, list[int]] = {}
    for app in got["apps"]:
        if app.pid is not None and app.pid in states:
            holders.setdefault(app.gpu_uuid, []).append(app.pid)
            if states[app.pid][0].startswith("D"):
                stuck.setdefault(app.gpu_uuid, []).append(app.pid)
    facts = HealthFacts(stats, got["xml"].gpus, got["kernel"], got["smi"], holders, stuck,
                        _users(got["devs"], states), opts.expected_gpus,
                        opts.held_mib, opts.idle_util_pct, opts.pcie_replay_warn, opts.xid_policy,
                        servers=servers)
    return facts, got


def active_servers(rows: list[systemd.UnitRow]) -> tuple[str, ...]:
    """Active units whose name or description is a GPU server (vllm-*, "vLLM Kimi ..."):
    where no process is visible at all, one of them holds the memory, unseen."""
    return tuple(sorted(r.unit for r in rows if r.active == "active" and (
        ps.server_kind(r.unit.replace("-", " ")) or ps.server_kind(r.description))))


def judge(facts: HealthFacts, got: Mapping[str, Any], options: PlaybookOptions
          ) -> tuple[list[GpuView], list[platform.GpuIssue]]:
    """Every GPU's verdict with its platform faults (PCIe, NVLink, heat) marked in (pure)."""
    views = decide(facts)
    issues = platform.gpu_issues(views, platform.reading(got), facts.xml, options)
    platform.mark(views, issues)
    return views, issues


def _states_and_units(text: str) -> tuple[dict[int, tuple[str, str]], dict[int, str | None]]:
    """One ``ps`` round trip for both: states (D = stuck) and the unit of each PID."""
    head, _, tail = text.partition(f"\n{ps.SECTION}\n")
    return ps.parse_states(head), ps.cgroup_units(tail)


DAEMONS = ("nvidia-persist", "nvidia-fabric", "nv-hostengine", "dcgm")  # hold /dev/nvidia*


def _users(pids: list[int], states: dict[int, tuple[str, str]]) -> list[int]:
    """Live PIDs holding /dev/nvidia* other than the driver's own daemons."""
    return [p for p in pids if p in states and not states[p][1].startswith(DAEMONS)]


def _smi(result: ProbeResult, timeout_s: float) -> list[SmiError]:
    return smi_errors.smi_problems(result.stdout, result.stderr, result.exit_status,
                                   result.timed_out, nvidia.unread_lines(result.stdout), timeout_s)


def run(session: Session, context: Mapping[str, Any]) -> Report:
    """Nothing of its own: ``playbooks.pipeline`` adds the GPU view to every playbook."""
    return Report(session.target.name)


def assess(facts: HealthFacts, views: list[GpuView], got: Mapping[str, Any],
           report: Report) -> None:
    """All gpu_health findings (pure over gathered data) but the step: the step, the reset
    and the reboot it proposes are ``playbooks/gpu_view.py``'s (its action classes import
    this module through the health gate)."""
    _tool_errors(facts, report)
    _summary(views, facts, report)
    for v in views:
        _per_gpu(v, report)
    missing_finding(facts, views, report)
    if facts.kernel.unbound:
        report.find("gpu.driver_unbound", Severity.CRITICAL if facts.expected else
                    Severity.WARNING, S.GPU_DRIVER_UNBOUND.format(quote=facts.kernel.unbound[-1]),
                    lines=facts.kernel.unbound[:5])
    _app_faults(facts, got.get("units", {}), report)
    _fabric(facts, got.get("fabric", ""), report)


def _tool_errors(facts: HealthFacts, report: Report) -> None:
    for e in facts.smi:
        title = S.GPU_TOOL_ERROR.format(quote=e.quote)
        if e.kind is SmiErrorKind.HUNG:
            title = e.quote  # our words (the tool said nothing): "timed out after 3.5 s"
        elif e.kind is SmiErrorKind.NVML_MISMATCH:
            title = _mismatch_title(e, facts.kernel)
        elif e.kind is SmiErrorKind.DENIED:
            title = S.GPU_TOOL_DENIED.format(quote=e.quote)
        elif e.kind is SmiErrorKind.MISSING:
            title = S.GPU_TOOL_MISSING.format(quote=e.quote)
        report.find("gpu.tool_error", _tool_severity(e, facts), title, kind=e.kind.value,
                    quote=e.quote, bus=e.bus)


def _tool_severity(e: SmiError, facts: HealthFacts) -> Severity:
    """Unreadable lines warn; a refusal warns (a person fixes the login, the GPUs are not
    known to be at fault); no nvidia-smi where the inventory names no GPUs is a note
    (a host without GPUs); the rest keep every GPU from being read: critical."""
    if e.kind is SmiErrorKind.UNREADABLE or e.kind is SmiErrorKind.DENIED:
        return Severity.WARNING
    if e.kind is SmiErrorKind.MISSING:
        return Severity.WARNING if facts.expected else Severity.INFO
    return Severity.CRITICAL


def _mismatch_title(e: SmiError, k: kernel.KernelReport) -> str:
    """Both versions where the kernel log and the tool name them; never a "?"."""
    m = k.mismatches[0] if k.mismatches else None
    driver = m.kernel_version if m else None
    library = (m.client_version if m else None) or e.library_version
    if driver and library:
        return S.GPU_DRIVER_MISMATCH.format(driver=driver, library=library)
    if library:
        return S.GPU_DRIVER_MISMATCH_LIBRARY.format(library=library)
    return S.GPU_DRIVER_MISMATCH_BARE


def _summary(views: list[GpuView], facts: HealthFacts, report: Report) -> None:
    unread = host_error(facts)
    if unread is not None and unread.kind is not SmiErrorKind.NO_DEVICES:
        _unread_summary(views, facts, unread, report)
        return
    c = counts(views)
    worst = {GpuVerdict.BROKEN.value, GpuVerdict.WEDGED.value}
    severity = Severity.CRITICAL if worst & set(c) else (
        Severity.WARNING if GpuVerdict.DEGRADED.value in c else Severity.INFO)
    worst_first = sorted(c.items(), key=lambda kv: -RANK[GpuVerdict(kv[0])])
    summary = ", ".join(f"{n} {S.GPU_VERDICT_WORDS.get(v, v)}" for v, n in worst_first)
    table = grid(views)
    report.find("gpu.verdicts", severity, S.GPU_VERDICTS.format(
        n=len(views), s=plural(len(views)), summary=summary),
        gpus=[_evidence(v) for v in views], counts=c, grid=table)
    idle = [v for v in views if v.verdict is GpuVerdict.HELD_IDLE]
    if idle:
        report.find("gpu.held_idle", Severity.WARNING, S.GPU_HELD_IDLE_AGREE.format(
            n=len(idle), s=plural(len(idle)), verb="holds" if len(idle) == 1 else "hold"),
            gpus=[v.index for v in idle])


def _unread_summary(views: list[GpuView], facts: HealthFacts, error: SmiError,
                    report: Report) -> None:
    """"8 GPUs expected: could not read the GPUs (nvidia-smi timed out after 3.5 s)"."""
    n = facts.expected or 0
    count = S.GPU_COUNT_EXPECTED.format(n=n, s=plural(n)) if n else S.GPU_COUNT_UNKNOWN
    why = error.quote if error.kind is SmiErrorKind.HUNG else \
        S.GPU_TOOL_ERROR.format(quote=error.quote)
    severity = _tool_severity(error, facts)
    report.find("gpu.verdicts", severity, S.GPU_VERDICTS_UNREAD.format(count=count, why=why),
                gpus=[_evidence(v) for v in views], counts=counts(views), grid=grid(views),
                expected=facts.expected, unread=error.kind.value)


def _per_gpu(v: GpuView, report: Report) -> None:
    name = _label(v)
    why = "; ".join(v.reasons)
    if v.verdict is GpuVerdict.BROKEN and why.startswith("missing:"):
        return  # one gpu.missing finding covers them (below)
    template = {GpuVerdict.BROKEN: S.GPU_BROKEN, GpuVerdict.WEDGED: S.GPU_WEDGED,
                GpuVerdict.DEGRADED: S.GPU_DEGRADED}.get(v.verdict)
    if template is not None:
        severity = Severity.WARNING if v.verdict is GpuVerdict.DEGRADED else Severity.CRITICAL
        report.find(f"gpu.{v.verdict.value}", severity, template.format(gpu=name, why=why),
                    gpu=_evidence(v))


def _label(v: GpuView) -> str:
    """``3 (5D:00.0)``, as the headline names it."""
    return gpu_label({"index": v.index, "bus": v.bus})


def _evidence(v: GpuView) -> dict[str, Any]:
    return {"index": v.index, "bus": v.bus, "uuid": v.uuid, "name": v.name,
            "verdict": v.verdict.value, "reasons": v.reasons,
            "step": v.step.value if v.step else None, "memory_used_mib": v.memory_used_mib,
            "memory_total_mib": v.memory_total_mib, "utilization_pct": v.util_pct}


def missing_finding(facts: HealthFacts, views: list[GpuView], report: Report) -> None:
    gone = [v for v in views if v.reasons and v.reasons[0].startswith("missing:")]
    if gone and facts.expected:
        report.find("gpu.missing", Severity.CRITICAL, S.GPU_MISSING.format(
            missing=len(gone), expected=facts.expected, seen=len(views) - len(gone)),
            expected=facts.expected, seen=len(views) - len(gone),
            gpus=_named_missing(facts, views))


def _named_missing(facts: HealthFacts, views: list[GpuView]) -> list[dict[str, Any]]:
    """The missing GPUs the kernel log names (adapter init failed on a bus no tool shows),
    with the index they would have in bus order: "GPU 7 (DB:00.0)"."""
    seen = [v.bus for v in views if v.bus]
    failed = [bus for bus, _ in facts.kernel.init_failures if bus and bus not in seen]
    named = list(dict.fromkeys(failed))
    order = sorted(seen + named)
    return [{"index": order.index(bus), "bus": bus} for bus in named]


def _app_faults(facts: HealthFacts, units: Mapping[int, str | None], report: Report) -> None:
    """Application Xids, joined pid -> unit like the idle-VRAM trace: who to restart."""
    for e in facts.kernel.xids:
        rule = facts.policy.rule(e.xid)
        if rule.fault.value == "unknown":
            report.find("gpu.xid_unknown", Severity.WARNING, S.GPU_XID_UNKNOWN.format(
                xid=e.xid, bus=e.bus), xid=e.xid, bus=e.bus, line=e.line)
        if rule.fault.value != "app":
            continue
        unit = units.get(e.pid) if e.pid else None
        who = f"pid {e.pid}, {e.process}" if e.pid else (e.process or "unknown process")
        who += f", {unit}" if unit else ""
        report.find("gpu.app_fault", Severity.WARNING, S.GPU_APP_FAULT.format(
            xid=e.xid, bus=e.bus, who=who, title=rule.title), xid=e.xid, bus=e.bus,
            pid=e.pid, unit=unit, line=e.line, step=rule.step.value)


def _fabric(facts: HealthFacts, state: str, report: Report) -> None:
    nvswitch = any(h.fabric_state for h in facts.xml)
    if nvswitch and state.strip() != "active":
        report.find("gpu.fabric_manager", Severity.CRITICAL, S.GPU_FABRIC_DOWN.format(
            state=state.strip()[:40] or "unknown"), state=state.strip()[:200])
