"""Render a ``Digest`` as one backend-neutral ``ChatMessage`` (pure).

Hosts come ordered by VRAM held idle, and a wasting host gets a red badge in its first
line: the question a morning reader asks is "which host wastes GPUs".
"""

from __future__ import annotations

from datetime import UTC, datetime

from bot.chat.base import ChatMessage, Section
from bot.chat.needs_view import needs_texts
from bot.chat.text import clip, code_safe, escape
from bot.core import fmt, strings
from bot.digest.model import Digest, DiskStats, HostStats, JobRecord, Stat, Waste
from bot.digest.response_stats import stats_lines
from bot.domain.repeat import RepeatOffence
from bot.domain.slurm import DrainedNode

MAX_HOST_SECTIONS = 10  # the most urgent hosts in detail; the ranking names more
NEEDS_SECTIONS = 2  # the ranking's lines, 3000 characters each: the message stays under
WASTE_BADGE_MINUTES = 30.0  # Slack's ~13,200 characters of block text (storm_view.py)


def fmt_gpu_minutes(minutes: float) -> str:
    if minutes >= 120:
        return f"{minutes / 60:.1f} GPU-hours"
    return f"{minutes:.0f} GPU-min"


def fmt_mib(mib: float) -> str:
    return fmt.size(mib * 1024 * 1024)


def fmt_period(start: float, end: float) -> str:
    a = datetime.fromtimestamp(start, UTC)
    b = datetime.fromtimestamp(end, UTC)
    return f"{a:%Y-%m-%d %H:%M} → {b:%Y-%m-%d %H:%M} UTC"


def _triple(template: str, stat: Stat, fmt: str) -> str:
    if fmt == "pct":
        return template.format(min=f"{stat.min:.0f}%", avg=f"{stat.avg:.0f}%",
                               max=f"{stat.max:.0f}%")
    return template.format(min=fmt_mib(stat.min), avg=fmt_mib(stat.avg), max=fmt_mib(stat.max))


def _disk_line(d: DiskStats) -> str:
    pct = f"{d.used_pct:.0f}%" if d.used_pct is not None else "?"
    size = fmt.size(d.size_bytes) if d.size_bytes is not None else "?"
    growth = f"{'+' if (d.growth_bytes_per_day or 0) >= 0 else '-'}"
    growth += fmt.size(abs(d.growth_bytes_per_day or 0.0))
    eta = (strings.DIGEST_DISK_FULL_IN.format(days=fmt.duration(d.days_until_full * 86400))
           if d.days_until_full is not None else strings.DIGEST_DISK_NOT_FILLING)
    return strings.DIGEST_DISK.format(mount=escape(d.mount), pct=pct, used=fmt.size(d.used_bytes),
                                      size=size, growth=growth, eta=eta)


def host_section(h: HostStats) -> Section:
    idle = h.idle_gpu_minutes
    badge = (strings.DIGEST_WASTE_BADGE.format(idle=fmt_gpu_minutes(idle))
             if idle >= WASTE_BADGE_MINUTES else "")
    fields: list[str] = []
    mem, util = h.gpu_stat("mem_used_mib"), h.gpu_stat("util_pct")
    if mem is not None:
        fields.append(_triple(strings.DIGEST_GPU_MEM, mem, "mib"))
    if util is not None:
        fields.append(_triple(strings.DIGEST_GPU_UTIL, util, "pct"))
    if mem is None and util is None:
        fields.append(strings.DIGEST_NO_GPU)
    fields.extend(_disk_line(d) for d in h.disks[:8])
    text = strings.DIGEST_HOST.format(host=escape(h.host), gpus=len(h.gpus), badge=badge)
    return Section(text=text, fields=tuple(fields))


def _actions_line(actions: dict[tuple[str, str], int]) -> str:
    if not actions:
        return strings.DIGEST_NO_ACTIONS
    parts = [f"{escape(kind)} {escape(result)} ×{n}"
             for (kind, result), n in sorted(actions.items())]
    return strings.DIGEST_ACTIONS.format(summary=", ".join(parts))


def _jobs_table(jobs: tuple[JobRecord, ...]) -> str:
    rows = [f"{'job':<14} {'host':<12} {'state':<10} {'done/total':>15} {'rate/s':>7}"]
    for j in jobs[:15]:
        pct = f" {100 * j.done / j.total:.0f}%" if j.total else ""
        rate = f"{j.rate:.2f}" if j.rate is not None else "-"
        rows.append(f"{j.id[:14]:<14} {j.host[:12]:<12} {j.state[:10]:<10} "
                    f"{f'{j.done}/{j.total}{pct}':>15} {rate:>7}")
    return code_safe("\n".join(rows))


MAX_WASTE_ROWS = 6


def gpu_hours(hours: float) -> str:
    """``12.5 GPU-h``: one decimal, the unit spelled out once."""
    return f"{hours:,.1f} GPU-h"


def _ranked(values: dict[str, float]) -> str:
    top = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = [f"{escape(k)} {gpu_hours(v)}" for k, v in top[:MAX_WASTE_ROWS]]
    if len(top) > MAX_WASTE_ROWS:
        shown.append(strings.SHOWN_OF.format(shown=MAX_WASTE_ROWS, total=len(top)))
    return ", ".join(shown)


def waste_lines(w: Waste) -> list[str]:
    """Wasted GPU-hours in total, per host and per unit (nothing when none was wasted)."""
    if w.total <= 0:
        return []
    return [strings.DIGEST_WASTE_HOSTS.format(util=w.idle_util_pct, total=gpu_hours(w.total),
                                              hosts=_ranked(w.by_host)),
            strings.DIGEST_WASTE_UNITS.format(units=_ranked(w.by_unit))]


def summary_section(d: Digest) -> Section:
    inc = d.incidents
    fields = [strings.DIGEST_INCIDENTS.format(opened=inc.opened, resolved=inc.resolved,
                                              open=inc.still_open)]
    if inc.ttr_median_s is not None and inc.ttr_max_s is not None:
        fields.append(strings.DIGEST_TTR.format(median=fmt.duration(inc.ttr_median_s),
                                                max=fmt.duration(inc.ttr_max_s)))
    fields += waste_lines(d.waste)
    fields.append(_actions_line(d.actions))
    if d.drained:
        fields.append(drained_line(d.drained, d.end))
    if d.rma:
        fields.append(rma_line(d.rma, d.end))
    gpus = sum(len(h.gpus) for h in d.hosts)
    text = strings.DIGEST_SUMMARY.format(hosts=len(d.hosts), gpus=gpus,
                                         idle=fmt_gpu_minutes(d.idle_gpu_minutes))
    return Section(text=text, fields=tuple(fields))


def needs_sections(d: Digest) -> list[Section]:
    """The hosts ranked by what they need of a person, across every cause (issue 37), in
    up to ``NEEDS_SECTIONS`` sections; the last says "N of M shown" when they do not fit."""
    hosts = len({h.host for h in d.hosts} | {n.host for n in d.needs})
    return [Section(t) for t in needs_texts(d.needs, hosts, strings.NEEDS_REST_DIGEST,
                                            sections=NEEDS_SECTIONS)]


def render_digest(d: Digest) -> ChatMessage:
    period = fmt_period(d.start, d.end)
    sections = [summary_section(d), *needs_sections(d)]
    sections += [host_section(h) for h in d.hosts[:MAX_HOST_SECTIONS]]
    if len(d.hosts) > MAX_HOST_SECTIONS:
        sections.append(Section(strings.HOSTS_SHOWN.format(shown=MAX_HOST_SECTIONS,
                                                           total=len(d.hosts))))
    if not d.hosts:
        sections.append(Section(strings.DIGEST_NO_HOSTS))
    if d.jobs:
        sections.append(Section(strings.DIGEST_JOBS_TITLE, code=_jobs_table(d.jobs)))
    if d.response:  # time to acknowledge and resolve, per kind, and the one-click share
        sections.append(Section("\n".join([strings.DIGEST_RESPONSE_TITLE,
                                            *stats_lines(d.response)])))
    text = strings.DIGEST_FALLBACK.format(period=period, hosts=len(d.hosts),
                                          idle=fmt_gpu_minutes(d.idle_gpu_minutes),
                                          opened=d.incidents.opened, resolved=d.incidents.resolved)
    a = datetime.fromtimestamp(d.start, UTC)
    b = datetime.fromtimestamp(d.end, UTC)
    context = strings.DIGEST_CONTEXT.format(start=f"{a:%Y-%m-%d %H:%M}",
                                            end=f"{b:%Y-%m-%d %H:%M} UTC")
    return ChatMessage(text=text, header=strings.DIGEST_HEADER.format(period=period),
                       sections=tuple(sections), context=(context,))


def rma_line(offences: tuple[RepeatOffence, ...], now: float) -> str:
    """The nodes kept out for RMA: which fault came back, how long after a passed gate."""
    shown = [strings.DIGEST_RMA_NODE.format(
        host=escape(o.host), key=escape(clip(o.key, 60)),
        after=fmt.duration(o.again_at - o.passed_at), ago=fmt.age(now, o.again_at))
        for o in offences[:MAX_WASTE_ROWS]]
    if len(offences) > MAX_WASTE_ROWS:
        shown.append(strings.SHOWN_OF.format(shown=MAX_WASTE_ROWS, total=len(offences)))
    return strings.DIGEST_RMA.format(nodes="; ".join(shown))


def drained_line(nodes: tuple[DrainedNode, ...], now: float) -> str:
    """The Slurm nodes still out of the scheduler, each with who, why and for how long."""
    shown = [f"{escape(n.name)} {n.view} "
             f"{fmt.age(now, n.since) if n.since is not None else '?'} "
             f"({escape(n.who)}: {escape(clip(n.reason or 'none', 80))})"
             for n in nodes[:MAX_WASTE_ROWS]]
    if len(nodes) > MAX_WASTE_ROWS:
        shown.append(strings.SHOWN_OF.format(shown=MAX_WASTE_ROWS, total=len(nodes)))
    return strings.DIGEST_DRAINED.format(nodes="; ".join(shown))
