"""Xid storms, folded: one host's alerts for one Xid are one tally on its incident (a count,
the first and last time, the GPUs), and what such an incident may do. Pure.

NVSentinel#1710: 672 "fatal" Xid 45 events on 3 nodes in 3 hours drained healthy nodes;
#1120: 800,000 Xid 95 lines were 29 distinct events. Here an application's Xid (the policy's
``fault: app`` rows: 13, 31, 43, 45… configurable in ``extra.xid_policy``) never drains or
pages alone: an incident whose Xids are all the application's is capped at warning (no
page, no on-call mention; drains come only from a hardware finding in the diagnosis),
unless a hardware Xid folds in beside it or ``extra.xid_policy.storm`` sets a rate it
passes (off by default: any default rate would have drained #1710's nodes). An Xid a later
event cleared (the GPU was reset, the host rebooted) stays in the tally and says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.core import fmt
from bot.core import strings as S
from bot.domain.findings import Severity
from bot.domain.xid import Fault, XidPolicy

_XID = re.compile(r"\bXid\s*:?\s*(\d{1,4})\b", re.I)
MAX_GPUS = 16
XID_ALERT_ENDED = "its alert ending (the GPU recovered)"


def xid_of(labels: Mapping[str, str], details: Mapping[str, Any], summary: str) -> int | None:
    """The Xid an alert is about: its ``xid`` label or detail, else ``Xid N`` in its summary."""
    for raw in (labels.get("xid"), details.get("xid")):
        text = str(raw).strip() if raw is not None else ""
        if text.isdigit() and 0 < int(text) < 10000:
            return int(text)
    m = _XID.search(summary or "")
    return int(m[1]) if m else None


def gpu_of(labels: Mapping[str, str], details: Mapping[str, Any]) -> str:
    for raw in (labels.get("gpu"), details.get("index"), details.get("gpu")):
        text = str(raw).strip() if raw is not None else ""
        if text and len(text) <= 20:
            return text
    return ""


@dataclass(frozen=True)
class XidTally:
    xid: int
    count: int
    first: float
    last: float
    gpus: tuple[str, ...] = ()
    cleared_at: float | None = None
    cleared_by: str = ""
    app: bool = False  # the policy blamed the application when it was counted

    def to_json(self) -> dict[str, Any]:
        return {"xid": self.xid, "count": self.count, "first": self.first, "last": self.last,
                "gpus": list(self.gpus), "cleared_at": self.cleared_at,
                "cleared_by": self.cleared_by, "app": self.app}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> XidTally:
        cleared = raw.get("cleared_at")
        return cls(int(raw["xid"]), int(raw.get("count") or 1), float(raw.get("first") or 0),
                   float(raw.get("last") or 0), tuple(str(g) for g in raw.get("gpus") or ()),
                   float(cleared) if cleared is not None else None,
                   str(raw.get("cleared_by") or "")[:200], bool(raw.get("app")))


def tally(tallies: Sequence[XidTally], xid: int, gpu: str, now: float,
          policy: XidPolicy) -> tuple[XidTally, ...]:
    """One more alert for ``xid``: counted, its GPU noted; a cleared Xid that fires again is
    live again."""
    out = list(tallies)
    i = next((n for n, t in enumerate(out) if t.xid == xid), None)
    if i is None:
        app = policy.rule(xid).fault is Fault.APP
        return (*out, XidTally(xid, 1, now, now, (gpu,) if gpu else (), app=app))
    t = out[i]
    gpus = t.gpus if not gpu or gpu in t.gpus else (*t.gpus, gpu)[:MAX_GPUS]
    out[i] = replace(t, count=t.count + 1, last=max(t.last, now), gpus=gpus, cleared_at=None,
                     cleared_by="")
    return tuple(out)


def cleared(tallies: Sequence[XidTally], by: str, at: float,
            xid: int | None = None) -> tuple[XidTally, ...]:
    """Every live tally (or only ``xid``'s) marked cleared ``by`` a later event: a verified
    reset or reboot, the alert ending because the GPU recovered."""
    return tuple(t if t.cleared_at is not None or t.last > at or (xid is not None and t.xid != xid)
                 else replace(t, cleared_at=at, cleared_by=by[:200]) for t in tallies)


def app_only(tallies: Sequence[XidTally]) -> bool:
    """Every Xid folded in is the application's (no hardware Xid beside them)."""
    return bool(tallies) and all(t.app for t in tallies)


def past_rate(tallies: Sequence[XidTally], policy: XidPolicy) -> bool:
    """An application Xid at or above ``policy.storm_rate`` (count within seconds), if set."""
    if policy.storm_rate is None:
        return False
    count, within = policy.storm_rate
    return any(t.count >= count and t.last - t.first <= within for t in tallies)


def capped(severity: Severity, tallies: Sequence[XidTally], policy: XidPolicy) -> Severity:
    """The incident's severity: at most warning while its Xids are all the application's."""
    if app_only(tallies) and not past_rate(tallies, policy) and severity is Severity.CRITICAL:
        return Severity.WARNING
    return severity


def storm_line(tallies: Sequence[XidTally], now: float, *, held: bool) -> str:
    """``Xid 45 ×224 since 10:02 UTC on GPU 1 (the application's Xid: no drain, no page on
    its own)``; ``held``: the incident's severity is capped by ``capped`` now."""
    parts = []
    for t in tallies:
        times = f" ×{t.count}" if t.count > 1 else ""
        gpus = f" on GPU {', '.join(t.gpus)}" if t.gpus else ""
        part = S.XID_TALLY.format(xid=t.xid, times=times, since=fmt.clock(t.first, now=now),
                                  gpus=gpus)
        if t.cleared_at is not None:
            part += S.XID_TALLY_CLEARED.format(by=t.cleared_by, at=fmt.clock(t.cleared_at,
                                                                           now=now))
        parts.append(part)
    line = "; ".join(parts)
    return line + (S.XID_TALLY_APP_ONLY if held and app_only(tallies) else "")
