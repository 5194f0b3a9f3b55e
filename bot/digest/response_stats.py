"""How fast incidents were answered: MTTA, MTTR and the one-click share, per kind or host.

Pure, over postmortems (``bot/digest/postmortem.py``), so ``/ir stats`` and the digest say
the same numbers the postmortem shows for each incident. "One click": one approval, the
fix verified and kept (not reverted), nothing failed or denied on the way. MTTR: from
detection to the verified fix that held, or to a person's resolve where nothing did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from statistics import fmean

from bot.core import fmt
from bot.core import strings as S
from bot.digest.postmortem import Postmortem, Step


@dataclass(frozen=True)
class ResponseRow:
    key: str  # the kind or the host
    incidents: int
    mtta_s: float | None  # mean over the incidents someone acknowledged
    mttr_s: float | None  # mean over the recovered ones (a verified fix that held, or resolved)
    one_click: int


def one_click(pm: Postmortem) -> bool:
    steps = [e.step for e in pm.events]
    return (steps.count(Step.APPROVED) == 1 and Step.VERIFIED in steps and not pm.reverted
            and Step.ACTION_FAILED not in steps and Step.DENIED not in steps)


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


def response_stats(pms: Iterable[Postmortem],
                   key: Callable[[Postmortem], str] = lambda pm: pm.kind) -> list[ResponseRow]:
    """One row per key (``lambda pm: pm.host`` for hosts), the most incidents first."""
    groups: dict[str, list[Postmortem]] = {}
    for pm in pms:
        groups.setdefault(key(pm), []).append(pm)
    rows = [ResponseRow(k, len(g), _mean(p.tta_s for p in g), _mean(p.recovered_s for p in g),
                        sum(1 for p in g if one_click(p))) for k, g in groups.items()]
    return sorted(rows, key=lambda r: (-r.incidents, r.key))


def stats_lines(rows: Iterable[ResponseRow]) -> list[str]:
    return [S.STATS_ROW.format(key=r.key, n=r.incidents, s="" if r.incidents == 1 else "s",
                               mtta=fmt.duration(r.mtta_s),
                               mttr=fmt.duration(r.mttr_s),
                               share=fmt.percent(r.one_click / r.incidents))
            for r in rows if r.incidents]
