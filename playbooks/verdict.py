"""One verdict per GPU from everything the health probes saw. Pure.

``broken`` > ``wedged`` > ``degraded`` > ``held_idle`` > ``busy`` > ``free``: the worst
reason wins and every reason is kept. GPUs the inventory expects but no tool shows are
rows too (``broken``, "missing"), so fewer GPUs is never a shorter, healthier list.

A verdict is an observation. When nvidia-smi cannot answer for the whole host (it hangs,
NVML will not start, the driver is not loaded, it was refused or is not installed) no
GPU was seen: the rows are the inventory's expected count, each ``unknown`` with the
tool's words, or no rows at all when the inventory does not say how many: never an
invented "1 GPU: wedged" and never "8 broken" for a permission or a version mismatch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from bot.core import fmt
from bot.core.strings import GPU_VERDICT_WORDS
from bot.domain.xid import DEFAULT_POLICY, STEP_RANK, XidPolicy, XidStep
from playbooks.gpu import GpuStat
from playbooks.parsers.kernel import KernelReport, XidEvent
from playbooks.parsers.nvidia_xml import GpuHealth
from playbooks.parsers.smi_errors import SmiError, SmiErrorKind
from playbooks.text import printable


class GpuVerdict(StrEnum):
    BUSY = "busy"
    HELD_IDLE = "held_idle"
    FREE = "free"
    WEDGED = "wedged"
    BROKEN = "broken"
    DEGRADED = "degraded"
    UNKNOWN = "unknown"  # not read: nvidia-smi could not answer for the host


RANK = {GpuVerdict.FREE: 0, GpuVerdict.BUSY: 1, GpuVerdict.HELD_IDLE: 2,
        GpuVerdict.DEGRADED: 3, GpuVerdict.UNKNOWN: 4, GpuVerdict.WEDGED: 5,
        GpuVerdict.BROKEN: 6}
# nvidia-smi cannot answer for the whole host: the step it calls for (None: not the GPUs'
# business, a person fixes the login's permissions or installs the tool)
HOST_WIDE: dict[SmiErrorKind, XidStep | None] = {
    SmiErrorKind.HUNG: XidStep.REBOOT, SmiErrorKind.NVML_MISMATCH: XidStep.REBOOT,
    SmiErrorKind.NVML_INIT: XidStep.REBOOT, SmiErrorKind.NO_DRIVER: XidStep.REBOOT,
    SmiErrorKind.NO_DEVICES: XidStep.REBOOT, SmiErrorKind.FAILED: XidStep.INVESTIGATE,
    SmiErrorKind.DENIED: None, SmiErrorKind.MISSING: None}


@dataclass
class GpuView:
    """One row of the grid."""

    index: int | None
    bus: str
    uuid: str = ""
    name: str = ""
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    util_pct: int | None = None
    verdict: GpuVerdict = GpuVerdict.FREE
    reasons: list[str] = field(default_factory=list)
    step: XidStep | None = None

    def mark(self, verdict: GpuVerdict, reason: str, step: XidStep | None = None) -> None:
        if RANK[verdict] > RANK[self.verdict]:
            self.verdict = verdict
        self.reasons.append(reason)
        if step is not None and (self.step is None or STEP_RANK[step] > STEP_RANK[self.step]):
            self.step = step


@dataclass(frozen=True)
class HealthFacts:
    """What the probes saw on one host (parsed, untrusted text already reduced)."""

    stats: list[GpuStat]
    xml: list[GpuHealth]
    kernel: KernelReport
    smi: list[SmiError]
    holders: dict[str, list[int]]  # gpu uuid -> live PIDs using it
    stuck: dict[str, list[int]]  # gpu uuid -> PIDs in D state using it
    device_users: list[int]  # live PIDs holding /dev/nvidia* (containers: no PID map)
    expected: int | None = None
    held_mib: int = 1024
    idle_util_pct: int = 5
    replay_warn: int = 100
    policy: XidPolicy = DEFAULT_POLICY
    named: frozenset[str] = frozenset()  # gpu uuids a playbook traced to a holder ps cannot see
    servers: tuple[str, ...] = ()  # active GPU-server units (a holder when no process shows)


def decide(f: HealthFacts) -> list[GpuView]:
    """Every GPU's verdict, in index order, with the missing ones last."""
    unread = host_error(f)
    if unread is not None:
        return _unread(f, unread)
    views = _rows(f)
    for view in views:
        _judge(view, f)
    return views + _missing(f, len(views))


def host_error(f: HealthFacts) -> SmiError | None:
    """The error that kept nvidia-smi from reading any GPU (a hang always does)."""
    wide = [e for e in f.smi if e.kind in HOST_WIDE]
    hung = [e for e in wide if e.kind is SmiErrorKind.HUNG]
    if hung or (wide and not f.stats):
        return (hung or wide)[0]
    return None


def _unread(f: HealthFacts, error: SmiError) -> list[GpuView]:
    """No GPU was read: the inventory's count of ``unknown`` rows (none when it gives no
    count); "No devices were found" on a host that should have GPUs: all missing."""
    if error.kind is SmiErrorKind.NO_DEVICES:
        return _missing(f, 0)
    step = HOST_WIDE[error.kind]
    rows = [GpuView(i, "") for i in range(f.expected or 0)]
    for row in rows:
        row.mark(GpuVerdict.UNKNOWN, error.quote, step)
    return rows


def _rows(f: HealthFacts) -> list[GpuView]:
    by_uuid = {h.uuid: h for h in f.xml if h.uuid}
    rows = []
    for s in f.stats:
        h = by_uuid.get(s.uuid)
        rows.append(GpuView(s.index, h.bus if h else "", s.uuid, s.name, s.memory_used_mib,
                            s.memory_total_mib, s.max_util_pct))
    seen = {r.uuid for r in rows}
    for h in f.xml:  # in -q -x but not in the CSV sample (rare: a GPU that just dropped)
        if h.uuid not in seen:
            rows.append(GpuView(None, h.bus, h.uuid, h.name, h.memory_used_mib,
                                h.memory_total_mib, h.util_pct))
    known = {r.bus for r in rows if r.bus}
    lost = [e.bus for e in f.smi if e.bus]
    for bus in dict.fromkeys(b for b in lost if b not in known):  # named but cannot be opened
        rows.append(GpuView(None, bus))
    _fill_gaps(rows)
    return rows


def _fill_gaps(rows: list[GpuView]) -> None:
    """A lost GPU keeps its NVML index: give unindexed rows the gaps, in bus order."""
    taken = {r.index for r in rows if r.index is not None}
    gaps = [i for i in range(len(rows)) if i not in taken]
    blank = sorted((r for r in rows if r.index is None), key=lambda r: r.bus)
    if len(gaps) == len(blank):
        for row, index in zip(blank, gaps, strict=True):
            row.index = index
    rows.sort(key=lambda r: (r.index is None, r.index or 0))


def _judge(v: GpuView, f: HealthFacts) -> None:
    health = next((h for h in f.xml if v.uuid and h.uuid == v.uuid), None)
    for e in f.smi:
        if e.bus and e.bus == v.bus:
            v.mark(GpuVerdict.BROKEN, e.quote, XidStep.REBOOT)
    _xids(v, [x for x in f.kernel.xids if v.bus and x.bus == v.bus], f.policy)
    if health is not None:
        _hardware(v, health, f.replay_warn)
    _use(v, f)


def _xids(v: GpuView, events: Iterable[XidEvent], policy: XidPolicy) -> None:
    for xid in sorted({e.xid for e in events}):
        rule = policy.rule(xid)
        if rule.breaks_gpu:
            v.mark(GpuVerdict.BROKEN, f"Xid {xid} since boot: {rule.title}", rule.step)
        elif rule.fault.value == "gpu" and rule.severity == "warning":
            v.mark(GpuVerdict.DEGRADED, f"Xid {xid} since boot: {rule.title}", rule.step)


def _hardware(v: GpuView, h: GpuHealth, replay_warn: int) -> None:
    if h.ecc_uncorrected:
        v.mark(GpuVerdict.BROKEN, f"{h.ecc_uncorrected} uncorrectable ECC error(s) since "
               "driver load", XidStep.RESET_GPU)
    if h.remap_failure:
        v.mark(GpuVerdict.BROKEN, "row remapping failed", XidStep.DRAIN_AND_TICKET)
    if h.remap_pending:
        v.mark(GpuVerdict.BROKEN, "row remap pending (applied at the next GPU reset)",
               XidStep.RESET_GPU)
    if h.slowdowns:
        v.mark(GpuVerdict.DEGRADED, "clocks slowed: " + ", ".join(h.slowdowns), XidStep.INVESTIGATE)
    retired = (h.retired_sbe or 0) + (h.retired_dbe or 0)
    if retired or h.retired_pending:
        v.mark(GpuVerdict.DEGRADED, f"{retired} retired page(s)"
               + (", retirement pending" if h.retired_pending else ""), XidStep.RESET_GPU)
    if h.replays is not None and h.replays >= replay_warn:
        v.mark(GpuVerdict.DEGRADED, f"{h.replays} PCIe replays", XidStep.INVESTIGATE)


def _use(v: GpuView, f: HealthFacts) -> None:
    held = (v.memory_used_mib or 0) > f.held_mib
    if v.uuid in f.stuck:
        pids = ", ".join(map(str, f.stuck[v.uuid][:4]))
        v.mark(GpuVerdict.WEDGED, f"process {pids} in D state (uninterruptible)", XidStep.REBOOT)
    elif held and not f.holders.get(v.uuid) and not f.device_users and not _unseen(v, f):
        v.mark(GpuVerdict.WEDGED, "memory held and no live process uses this GPU",
               XidStep.RESET_GPU)
    if v.util_pct is not None and v.util_pct > f.idle_util_pct:
        v.mark(GpuVerdict.BUSY, "")
    elif held and v.util_pct is not None:
        v.mark(GpuVerdict.HELD_IDLE, "")
    v.reasons = [r for r in v.reasons if r]


def _unseen(v: GpuView, f: HealthFacts) -> bool:
    """A holder this login cannot see: the playbook traced this GPU to a unit or container,
    or no process uses any GPU while an active unit runs a GPU server (its PIDs live in a
    namespace this login cannot see): held, not wedged."""
    return v.uuid in f.named or (bool(f.servers) and not any(f.holders.values()))


def _missing(f: HealthFacts, seen: int) -> list[GpuView]:
    """The GPUs the inventory expects beyond the ``seen`` ones, each ``broken``/missing."""
    if not f.expected or seen >= f.expected:
        return []
    rows = [GpuView(None, "") for _ in range(f.expected - seen)]
    for row in rows:
        row.mark(GpuVerdict.BROKEN, f"missing: the inventory expects {f.expected} GPUs, "
                 f"the host shows {seen}", XidStep.DRAIN_AND_TICKET)
    return rows


def worst_step(views: Iterable[GpuView]) -> XidStep | None:
    steps = [v.step for v in views if v.step is not None]
    return max(steps, key=lambda s: STEP_RANK[s]) if steps else None


def counts(views: Iterable[GpuView]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in views:
        out[v.verdict.value] = out.get(v.verdict.value, 0) + 1
    return out


def grid(views: list[GpuView]) -> str:
    """The compact per-GPU table shown in chat (monospace)."""
    head = f"{'GPU':<4}{'bus':<12}{'verdict':<22}{'memory':>10} {'util':>5}  why"
    rows = [head]
    for v in views:
        idx = "?" if v.index is None else str(v.index)
        mem = "?" if v.memory_used_mib is None else fmt.gib(v.memory_used_mib)
        util = "?" if v.util_pct is None else f"{v.util_pct}%"
        why = printable("; ".join(v.reasons), 90)
        word = GPU_VERDICT_WORDS.get(v.verdict.value, v.verdict.value)
        rows.append(f"{idx:<4}{(v.bus or '-'):<12}{word:<22}{mem:>10} {util:>5}  {why}")
    return "\n".join(rows)
