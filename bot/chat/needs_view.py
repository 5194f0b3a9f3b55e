"""Hosts ranked by what they need of a person, as lines a person reads (pure; issue 37):
the digest's text and the Home tab say it with the same words, in the same order."""

from __future__ import annotations

from collections.abc import Sequence

from bot.chat.text import clip, escape
from bot.core import fmt, strings
from bot.domain.fleet_needs import NOW, HostNeed, Need, Reason

SECTION_TEXT = 3000


def reason_text(r: Reason) -> str:
    if r.need is Need.FULL_SOON:
        pct = f"{r.extra:.0f}%"
        if r.value <= 0:
            return strings.NEED_FULL_NOW.format(mount=escape(r.detail), pct=pct)
        return strings.NEED_FULL.format(mount=escape(r.detail), pct=pct,
                                        eta=fmt.duration(r.value * 86400))
    if r.need is Need.FAILING:
        if r.value:
            return strings.NEED_FAILING.format(failed=int(r.value), n=int(r.extra))
        return strings.NEED_INCIDENTS.format(n=int(r.extra))
    if r.need is Need.DRAINED:
        return strings.NEED_DRAINED.format(age=fmt.duration(r.value * 3600))
    if r.detail == NOW:
        return strings.NEED_IDLE_NOW.format(n=int(r.value))
    return strings.NEED_IDLE.format(gpu_hours=f"{r.value:,.1f} GPU-h")


def short_reason(r: Reason) -> str:
    """A few words for a chart's row label: the most urgent reason only."""
    if r.need is Need.FULL_SOON:
        return (strings.TAG_FULL_NOW.format(pct=f"{r.extra:.0f}%") if r.value <= 0
                else strings.TAG_FULL.format(eta=fmt.duration(r.value * 86400)))
    if r.need is Need.FAILING:
        return (strings.TAG_FAILED.format(n=int(r.value)) if r.value
                else strings.TAG_INCIDENTS.format(n=int(r.extra)))
    if r.need is Need.DRAINED:
        return strings.TAG_DRAINED.format(age=fmt.duration(r.value * 3600))
    if r.detail == NOW:
        return strings.TAG_IDLE_NOW.format(n=int(r.value))
    return strings.TAG_IDLE.format(gpu_hours=f"{r.value:,.0f}")


def need_line(rank: int, n: HostNeed) -> str:
    return strings.NEEDS_LINE.format(rank=rank, host=escape(n.host),
                                     reasons=" · ".join(reason_text(r) for r in n.reasons))


def needs_texts(needs: Sequence[HostNeed], total_hosts: int, rest: str, *,
                sections: int = 1, limit: int = SECTION_TEXT) -> list[str]:
    """The ranked lines packed into at most ``sections`` texts of ``limit`` characters;
    when they do not all fit, the last text ends saying how many are shown of how many
    and where the rest are. Never empty: no need at all is said too."""
    if not needs:
        return [strings.NEEDS_NONE]
    head = strings.NEEDS_TITLE.format(n=len(needs), total=total_hosts)
    texts: list[list[str]] = [[head]]
    size = len(head)
    for k, n in enumerate(needs, 1):
        line = clip(need_line(k, n), 400)
        final = len(texts) == sections
        tail = strings.NEEDS_SHOWN.format(shown=k, n=len(needs), rest=rest)
        room = limit - (len(tail) + 1 if final and k < len(needs) else 0)
        if size + 1 + len(line) > room:
            if final:
                texts[-1].append(strings.NEEDS_SHOWN.format(shown=k - 1, n=len(needs),
                                                            rest=rest))
                break
            texts.append([])
            size = -1
        texts[-1].append(line)
        size += 1 + len(line)
    return ["\n".join(t) for t in texts]
