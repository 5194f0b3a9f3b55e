"""What a holder of GPU memory holds, and for how long, in on-call words. Pure.

How long memory has been held is how long its holder has run (``ps -o etimes``), "since
boot (18 h)" when it started with the boot: never the sampling window, never the
incident's age.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.core import fmt
from bot.core import strings as S
from bot.domain.findings import Finding

BOOT_WINDOW_S = 300.0  # a holder started this soon after boot was "auto-started at boot"


def holders_of(f: Finding) -> list[Mapping[str, Any]]:
    holders = f.evidence.get("holders")
    return [h for h in holders if isinstance(h, Mapping)] if isinstance(holders, list) else []


def held_parts(f: Finding) -> tuple[str, str]:
    """The headline for held memory and, apart, its clock-dependent duration:
    (``vllm-….service, auto-started at boot, holds 8 GPUs × 75.8 GiB at 0%``,
    ``since boot (18 h)``): who, what it holds, and how long its holder has run."""
    gpus = [g for g in f.evidence.get("gpus") or [] if isinstance(g, Mapping)]
    holders = holders_of(f)
    if not holders:
        return S.HEADLINE_HELD_UNKNOWN.format(gpus=gpu_amount(gpus), util=utilisation(gpus)), ""
    first = holders[0]
    after = _num(first.get("started_after_boot_s"))
    if after is None:  # a holder ps cannot see: when its unit became active
        after = _num(first.get("unit_active_after_boot_s"))
    started = ""
    if after is not None and after <= BOOT_WINDOW_S:  # "auto-": something started it
        restarter = f.evidence.get("restarter")
        auto = bool(first.get("unit")) or (isinstance(restarter, Mapping)
                                           and restarter.get("kind") not in (None, "none"))
        started = S.HEADLINE_STARTED_AT_BOOT if auto else S.HEADLINE_STARTED_WITH_BOOT
    text = S.HEADLINE_HELD.format(who=holder_name(f), started=started, gpus=gpu_amount(gpus),
                                  util=utilisation(gpus))
    return text, held_for(first)


def holder_name(f: Finding) -> str:
    """Who holds the GPUs, as people name it: the unit that restarts it, the container,
    the Slurm job, else the PID with its command line and user
    (``PID 3391 `python3 sweep.py` (user ubuntu)``); a holder whose process this login
    cannot see is named by its unit or container and says so."""
    restarter = f.evidence.get("restarter")
    holders = holders_of(f)
    first = holders[0] if holders else {}
    hidden = bool(first.get("hidden"))
    name = ""
    if isinstance(restarter, Mapping) and restarter.get("kind") in ("systemd", "docker") \
            and restarter.get("name"):
        name = str(restarter["name"]) if restarter["kind"] == "systemd" else \
            S.HOLDER_CONTAINER.format(name=restarter["name"])
    elif first.get("slurm_job"):
        name = S.HOLDER_SLURM_JOB.format(job=first["slurm_job"], user=first.get("user") or "?")
    elif first.get("unit") and not str(first["unit"]).startswith(("session-", "user@")):
        name = str(first["unit"])
    if name:
        return S.HOLDER_HIDDEN.format(name=name) if hidden else name
    if not holders:
        return "an unknown process"
    pid, user, server = first.get("pid", "?"), first.get("user"), first.get("kind")
    command = short_command(str(first.get("args") or ""))
    if server or not command:  # a known server: its kind says more than a cut command line
        who = ", ".join(str(p) for p in (server or "process", user and f"user {user}") if p)
        return S.HOLDER_SERVER.format(pid=pid, who=who)
    return S.HOLDER_PROCESS.format(pid=pid, command=command) + (
        S.HOLDER_USER.format(user=user) if user else "")


def short_command(args: str, limit: int = 40) -> str:
    """A command line as a person recognises it: the program's name and what follows,
    cut at ``limit`` (``/usr/bin/python3 sweep.py --lr 3e-4`` → ``python3 sweep.py --lr
    3e-4``); backticks become quotes so it sits in a code span."""
    head, _, rest = " ".join(args.split()).partition(" ")
    text = " ".join(p for p in (head.rsplit("/", 1)[-1], rest) if p).replace("`", "'")
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def held_for(holder: Mapping[str, Any]) -> str:
    """How long memory has been held = how long its holder has run (``ps -o etimes``),
    else since its unit became active (``unit_active_after_boot_s`` and the host's
    ``uptime_s``): ``since boot (18 h)`` when it started with the boot, else ``for 2 h``."""
    uptime_s = _num(holder.get("uptime_s"))
    elapsed = _num(holder.get("elapsed_s"))
    after = _num(holder.get("started_after_boot_s"))
    unit_after = _num(holder.get("unit_active_after_boot_s"))
    if elapsed is None and unit_after is not None and uptime_s is not None:
        elapsed, after = max(uptime_s - unit_after, 0.0), unit_after
    if elapsed is None:
        return ""
    if after is not None and after <= BOOT_WINDOW_S:
        return S.DIAG_HELD_SINCE_BOOT.format(duration=fmt.duration(elapsed))
    return S.DIAG_HELD_FOR.format(duration=fmt.duration(elapsed))


def gpu_amount(gpus: Sequence[Mapping[str, Any]]) -> str:
    """``8 GPUs × 75.8 GiB`` when all hold the same, else ``3 GPUs, 70.1–75.8 GiB``."""
    n = len(gpus)
    label = f"{n} GPU{_s(n)}"
    mibs = [m for m in (_num(g.get("memory_used_mib")) for g in gpus) if m is not None]
    shown = sorted({fmt.gib(m) for m in mibs}) or ["? GiB"]
    if len(shown) == 1:
        return f"{label} × {shown[0]}"
    low, high = fmt.gib(min(mibs)), fmt.gib(max(mibs))
    return f"{label}, {low.removesuffix(' GiB')}–{high}"


def amount_each(gpus: Sequence[Mapping[str, Any]]) -> str:
    """``68.5 GiB each`` (``68.5 GiB`` for one GPU), else the range ``58.6–68.5 GiB``."""
    mibs = [m for m in (_num(g.get("memory_used_mib")) for g in gpus) if m is not None]
    shown = sorted({fmt.gib(m) for m in mibs})
    if not shown:
        return "memory"
    if len(shown) == 1:
        return shown[0] + (" each" if len(gpus) > 1 else "")
    return f"{fmt.gib(min(mibs)).removesuffix(' GiB')}–{fmt.gib(max(mibs))}"


def utilisation(gpus: Sequence[Mapping[str, Any]]) -> str:
    values = [_num(g.get("utilization_pct", g.get("max_util_pct"))) for g in gpus]
    known = [v for v in values if v is not None]
    if not known:
        return "unknown utilisation"
    lo, hi = min(known), max(known)
    return f"{hi:.0f}%" if f"{lo:.0f}" == f"{hi:.0f}" else f"{lo:.0f}–{hi:.0f}%"


def _num(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def _s(n: int) -> str:
    return "" if n == 1 else "s"
