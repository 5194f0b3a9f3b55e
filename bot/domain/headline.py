"""The headline: what blocks recovery, in words an on-call acts on. Pure.

The rule, in one sentence: **the first blocker in this order: a GPU tool that cannot
answer, a broken or missing GPU, a full filesystem, wedged GPUs, a fabric that is down
(Fabric Manager, an InfiniBand port), the finding that the first proposed action able to
name one fixes, a platform fault (NVLink errors, a downtrained PCIe link, slowed clocks,
heat, a flapping or erring port), a GPU tool the login may not run (or that is not
installed), else the most severe finding**; the crash or reboot (``boot.previous``) is
never the headline but the context line under it. A refusal comes late: it says nothing
about the GPUs, and a full disk or a named holder is what blocks.
Hardware comes first because no action on a process helps a GPU that fell off the bus,
and the host's GPUs cannot be judged while nvidia-smi is down; a full disk next because
nothing recovers (no write, no restart, processes stuck in D state) until it has room.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bot.core import strings as S
from bot.domain import holding
from bot.domain.findings import Diagnosis, Finding, ProposedAction
from bot.domain.holding import held_parts, holders_of

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
HOST_WIDE_TOOL = ("hung", "nvml_mismatch", "nvml_init", "no_driver", "no_devices", "failed")
REFUSED_TOOL = ("denied", "missing")  # the login may not run it, or it is not there
XID_RE = re.compile(r"\bXid (\d+)\b")
TIMED_OUT_RE = re.compile(r"timed out after (\S+ s)")
JOURNAL_MOUNTS = ("/", "/var", "/var/log")
EVERY_GPU = "all"  # a GPU reset's ``gpu`` parameter for every GPU at once
# fabric and platform findings (playbooks/platform.py), most telling first
FABRIC_DOWN = ("gpu.fabric_manager", "ib.port_down")
PLATFORM = ("nvlink.errors", "pcie.downtrained", "gpu.clocks_slowed", "gpu.hot", "ib.link_flaps",
            "ib.symbol_errors")


class Fixes(StrEnum):
    """Which finding an action can be shown to fix, read from its parameters. Each action
    class names its own (``Action.fixes``); the headline and the outcome word match on it
    and never on an action kind, which this layer does not know."""

    UNIT_HOLDING = "unit_holding"  # held GPU memory whose holder or restarter is ``unit``
    PID_HOLDING = "pid_holding"  # held GPU memory that process ``pid`` holds
    JOURNAL = "journal"  # a full filesystem the journal lives on
    PATHS = "paths"  # a full filesystem the ``paths`` are under
    GPU_WEDGED = "gpu_wedged"  # a wedged GPU whose index is ``gpu`` (or ``all`` of them)


# an action kind → what it fixes (the action registry's ``fixes_of``; None: nothing named)
FixesOf = Callable[[str], Fixes | None]


@dataclass(frozen=True)
class Headline:
    """The headline text (no host), the findings it speaks for, and the context line."""

    text: str
    covers: tuple[int, ...] = ()  # indexes into diagnosis.findings
    context: str = ""
    since: str = ""  # the clock-dependent tail of ``text`` ("since boot (18 h)")

    @property
    def stable_text(self) -> str:
        """``text`` without its duration: what an evidence hash may include."""
        return self.text.removesuffix(" " + self.since) if self.since else self.text

    @property
    def finding(self) -> int | None:
        return self.covers[0] if self.covers else None


def choose(d: Diagnosis, fixes_of: FixesOf) -> Headline:
    """The headline by the module's rule (see its docstring); ``fixes_of`` says which
    finding each proposed action's kind fixes."""
    found = list(enumerate(d.findings))
    pick = (_tool(found, HOST_WIDE_TOOL) or _broken(found) or _full(found) or _wedged(found)
            or _platform(found, FABRIC_DOWN) or _action(d, found, fixes_of)
            or _platform(found, PLATFORM) or _tool(found, REFUSED_TOOL) or _most_severe(found))
    if pick is None:
        return Headline(S.HEADLINE_NOTHING, (), _context(found, ()))
    return Headline(pick.text, pick.covers, _context(found, pick.covers), pick.since)


def _of(found: Sequence[tuple[int, Finding]], code: str) -> list[tuple[int, Finding]]:
    return [(i, f) for i, f in found if f.code == code]


def _tool(found: Sequence[tuple[int, Finding]], kinds: tuple[str, ...]) -> Headline | None:
    """nvidia-smi could not answer for the host (``kinds``): the headline says so in its
    words; a refusal only where it matters (not the note of a host without GPUs)."""
    for i, f in _of(found, "gpu.tool_error"):
        kind = str(f.evidence.get("kind", ""))
        if kind not in kinds or f_sev(f) == "info":
            continue
        same = tuple(j for j, g in found if j == i or _repeats(g, f) or _unread(g))
        if kind == "hung":
            m = TIMED_OUT_RE.search(f.title)
            return Headline(S.HEADLINE_SMI_HUNG.format(secs=m[1] if m else "?"), same)
        if kind == "no_driver":
            return Headline(S.HEADLINE_NO_DRIVER.format(quote=f.evidence.get("quote", "")), same)
        return Headline(f.title, same)
    return None


def _unread(g: Finding) -> bool:
    """The GPU summary that only says no GPU could be read (the tool's headline says why)."""
    return g.code == "gpu.verdicts" and bool(g.evidence.get("unread"))


def _repeats(g: Finding, tool: Finding) -> bool:
    """Per-GPU findings that only repeat the tool's error (every row wedged by a hang)."""
    quote = str(tool.evidence.get("quote", ""))
    gpu = g.evidence.get("gpu")
    return bool(quote) and isinstance(gpu, Mapping) and list(gpu.get("reasons") or []) == [quote]


def _broken(found: Sequence[tuple[int, Finding]]) -> Headline | None:
    broken = _of(found, "gpu.broken")
    if broken:
        i, f = broken[0]
        gpu = f.evidence.get("gpu")
        if not isinstance(gpu, Mapping):
            return Headline(_first_line(f), (i,))
        bus = gpu.get("bus")
        also = tuple(j for j, g in _of(found, "gpu.tool_error") if bus and g.evidence.get("bus")
                     and str(g.evidence.get("bus")).lower().startswith(str(bus).lower()))
        return Headline(broken_text(gpu), (i, *also))
    missing = _of(found, "gpu.missing")
    if missing:
        i, f = missing[0]
        return Headline(missing_text(f.evidence), (i,))
    return None


def gpu_label(gpu: Mapping[str, Any]) -> str:
    """``2 (3A:00.0)``: the index nvidia-smi uses and the bus id the kernel log uses."""
    index = gpu.get("index")
    label = "?" if index is None else str(index)
    bus = bus_label(str(gpu.get("bus") or ""))
    return f"{label} ({bus})" if bus else label


def bus_label(bus: str) -> str:
    """``0000:3a:00`` or ``00000000:3A:00.0`` → ``3A:00.0`` (how people quote it)."""
    parts = bus.split(":")
    if len(parts) < 2 or not parts[-1]:
        return ""
    tail = f"{parts[-2]}:{parts[-1]}".upper()
    return tail if "." in tail else tail + ".0"


def broken_text(gpu: Mapping[str, Any]) -> str:
    reasons = [str(r) for r in gpu.get("reasons") or []]
    label = gpu_label(gpu)
    xids = [int(m[1]) for r in reasons if (m := XID_RE.search(r))]
    if 79 in xids or any("fallen off the bus" in r.lower() for r in reasons):
        return S.HEADLINE_GPU_LOST.format(gpu=label, xid=79)
    if any("uncorrectable ECC" in r or "double-bit" in r for r in reasons):
        return S.HEADLINE_GPU_ECC.format(gpu=label)
    if xids:
        title = next(r.split(": ", 1)[-1] for r in reasons if XID_RE.search(r))
        return S.HEADLINE_GPU_XID.format(gpu=label, xid=xids[0], title=title)
    if reasons and "device handle" in reasons[0]:
        return S.HEADLINE_GPU_UNOPENED.format(gpu=label, quote=reasons[0])
    return S.HEADLINE_GPU_BROKEN.format(gpu=label, why=reasons[0] if reasons else "?")


def missing_text(evidence: Mapping[str, Any]) -> str:
    expected, seen = evidence.get("expected", "?"), evidence.get("seen", "?")
    known = [g for g in evidence.get("gpus") or [] if isinstance(g, Mapping)]
    n = expected - seen if isinstance(expected, int) and isinstance(seen, int) else 0
    if n == 1 and known:
        return S.HEADLINE_GPU_MISSING.format(gpu=gpu_label(known[0]), seen=seen,
                                             expected=expected)
    return S.HEADLINE_GPUS_MISSING.format(n=n or "?", s="" if n == 1 else "s", seen=seen,
                                          expected=expected)


def _full(found: Sequence[tuple[int, Finding]]) -> Headline | None:
    """The critical filesystem the alert named, else the fullest (first on ties): a page
    about /data that opens on "/ is 99% full" reads as the wrong host's message."""
    full = [(i, f) for i, f in _of(found, "disk.full") if f_sev(f) == "critical"]
    if not full:
        return None
    i, f = max(full, key=lambda p: (p[1].evidence.get("alerted") is True, _pct(p[1]), -p[0]))
    return Headline(f.title, (i,))


def _pct(f: Finding) -> float:
    fs = f.evidence.get("filesystem")
    return (_num(fs.get("used_pct")) or 0.0) if isinstance(fs, Mapping) else 0.0


def _wedged(found: Sequence[tuple[int, Finding]]) -> Headline | None:
    wedged = _of(found, "gpu.wedged")
    if not wedged:
        return None
    whys = [_reasons(f) for _, f in wedged]
    n = len(wedged)
    covers = tuple(i for i, _ in wedged)
    if all(any("no live process" in r for r in rs) for rs in whys):
        mem = holding.amount_each([g for _, f in wedged if isinstance(
            g := f.evidence.get("gpu"), Mapping)])
        return Headline(S.HEADLINE_WEDGED_NO_PROCESS.format(
            n=n, s=_s(n), mem=mem, them="it" if n == 1 else "them"), covers)
    first = next((r for rs in whys for r in rs), "?")
    return Headline(S.HEADLINE_WEDGED.format(n=n, s=_s(n), why=first), covers)


def _platform(found: Sequence[tuple[int, Finding]], codes: tuple[str, ...]) -> Headline | None:
    """The most telling fabric or platform finding, naming how many more of its kind."""
    hits = [(i, f) for i, f in found if f.code in codes]
    if not hits:
        return None
    _, f = min(hits, key=lambda p: (codes.index(p[1].code), p[0]))
    same = tuple(j for j, g in hits if g.code == f.code)
    text = _first_line(f)
    if len(same) > 1:
        text = S.HEADLINE_AND_MORE.format(text=text, n=len(same) - 1)
    return Headline(text, same)


def _reasons(f: Finding) -> list[str]:
    gpu = f.evidence.get("gpu")
    return [str(r) for r in (gpu.get("reasons") or [])] if isinstance(gpu, Mapping) else []


def _action(d: Diagnosis, found: Sequence[tuple[int, Finding]],
            fixes_of: FixesOf) -> Headline | None:
    """The first action that names a finding it fixes (a watchdog's stop names none: the
    unit it restarts is the next action's, and the held memory is the headline)."""
    hit = next((h for a in d.actions if (h := fixed_by(a, found, fixes_of(a.kind))) is not None),
               None)
    return None if hit is None else _said(*hit)


def _said(i: int, f: Finding) -> Headline:
    if f.code != "gpu.idle_vram_held":
        return Headline(_first_line(f), (i,))
    what, since = held_parts(f)
    return Headline(f"{what} {since}".rstrip(), (i,), since=since)


def _first_line(f: Finding) -> str:
    return f.title.splitlines()[0] if f.title else f.code


def fixed_by(action: ProposedAction, found: Sequence[tuple[int, Finding]],
             fixes: Fixes | None) -> tuple[int, Finding] | None:
    """The finding ``action`` would fix (``fixes``: its kind's rule), if one can be named
    from the evidence."""
    if fixes is None:
        return None
    matches: dict[Fixes, tuple[str, Callable[[Finding], bool]]] = {
        Fixes.UNIT_HOLDING: ("gpu.idle_vram_held",
                             lambda f: action.params.get("unit") in _units(f)),
        Fixes.PID_HOLDING: ("gpu.idle_vram_held", lambda f: action.params.get("pid") in _pids(f)),
        Fixes.JOURNAL: ("disk.full", lambda f: _mount(f) in JOURNAL_MOUNTS),
        Fixes.PATHS: ("disk.full", lambda f: _under(action.params.get("paths", ""), _mount(f))),
        Fixes.GPU_WEDGED: ("gpu.wedged",
                           lambda f: action.params.get("gpu") in (EVERY_GPU, str(_gpu_index(f)))),
    }
    code, match = matches[fixes]
    return next(((i, f) for i, f in found if f.code == code and match(f)), None)


def _gpu_index(f: Finding) -> object:
    gpu = f.evidence.get("gpu")
    return gpu.get("index") if isinstance(gpu, Mapping) else None


def _units(f: Finding) -> set[str]:
    restarter = f.evidence.get("restarter")
    names = {str(h.get("unit")) for h in holders_of(f) if h.get("unit")}
    if isinstance(restarter, Mapping) and restarter.get("name"):
        names.add(str(restarter["name"]))
    return names


def _pids(f: Finding) -> set[str]:
    return {str(h.get("pid")) for h in holders_of(f)}


def _mount(f: Finding) -> str:
    fs = f.evidence.get("filesystem")
    return str(fs.get("mount", "")) if isinstance(fs, Mapping) else ""


def _under(paths: str, mount: str) -> bool:
    first = paths.split(",")[0].split("\n")[0].strip()
    return bool(mount) and (mount == "/" or first == mount or first.startswith(mount + "/"))


def _most_severe(found: Sequence[tuple[int, Finding]]) -> Headline | None:
    ranked = [(i, f) for i, f in found if f.code not in ("playbook.auto", "boot.previous")]
    if not ranked:
        return None
    i, f = min(ranked, key=lambda p: (SEVERITY_RANK.get(str(f_sev(p[1])), 3), p[0]))
    return _said(i, f)


def f_sev(f: Finding) -> str:
    return str(getattr(f.severity, "value", f.severity))


def _context(found: Sequence[tuple[int, Finding]], covers: tuple[int, ...]) -> str:
    """The reboot or crash under the headline: ``Booted 18 h ago; previous boot …``."""
    boot = next(((i, f) for i, f in _of(found, "boot.previous") if i not in covers), None)
    if boot is None:
        return ""
    title = boot[1].title
    return title[:1].upper() + title[1:] + ("" if title.endswith(".") else ".")


def _num(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def _s(n: int) -> str:
    return "" if n == 1 else "s"
