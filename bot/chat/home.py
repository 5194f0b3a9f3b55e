"""The App Home tab: the fleet at a glance, rendered purely from a snapshot.

Per host its GPUs (busy / held idle / free / broken), the open incidents with state and
age, and running extractions with their progress. ``classify_gpus`` turns a host's
latest samples into those four counts; ``render_home`` gives the ``views.publish`` view.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.chat.needs_view import needs_texts
from bot.chat.summary import STATE_ICON
from bot.chat.text import clip, escape
from bot.core import fmt, strings
from bot.domain.fleet_needs import DiskFact, HostFacts, rank_hosts
from bot.domain.maintenance import MaintenanceWindow
from bot.domain.slurm import DrainedNode
from bot.jobs.progress import bar

GPU_FIELD = re.compile(r"^gpu(?P<index>\d{1,3})\.(?P<field>mem_used_mib|util_pct)$")
DISK_FIELD = re.compile(r"^disk:(?P<mount>/.*)\.(?P<field>used_bytes|size_bytes)$")
MAX_BLOCKS = 100  # a Home view allows 100 blocks
MAX_ROWS = 25  # per list, so the three lists always fit
NEEDS_SECTIONS = 2  # the ranking's lines, 3000 characters each
FAILED_STATES = frozenset({"action_failed", "diagnosis_failed"})


@dataclass(frozen=True)
class HostGpus:
    host: str
    busy: int = 0
    held_idle: int = 0
    free: int = 0
    broken: int = 0  # expected but missing from the samples, or reporting nothing usable
    unsampled: int = 0  # the inventory expects them and no sample of this host exists yet
    disks: tuple[DiskFact, ...] = ()  # each mount's latest fill (the ranking's "full")

    @property
    def total(self) -> int:
        return self.busy + self.held_idle + self.free + self.broken


@dataclass(frozen=True)
class IncidentRow:
    id: str
    host: str
    kind: str
    state: str
    opened_at: float


@dataclass(frozen=True)
class JobRow:
    name: str
    host: str
    done: int
    total: int
    rate: float | None = None


@dataclass(frozen=True)
class Fleet:
    now: float
    hosts: tuple[HostGpus, ...] = ()
    incidents: tuple[IncidentRow, ...] = ()
    jobs: tuple[JobRow, ...] = ()
    maintenance: tuple[MaintenanceWindow, ...] = ()  # recurring silences (issue 28)
    drained: tuple[DrainedNode, ...] = ()  # Slurm nodes out of the scheduler (issue 26)


def classify_gpus(host: str, latest: Mapping[str, float], expected: int = 0,
                  idle_mem_mib: float = 1024.0, idle_util_pct: float = 5.0) -> HostGpus:
    """Latest ``gpuN.mem_used_mib``/``gpuN.util_pct`` per GPU → the four counts.

    Busy: utilisation above the idle threshold. Held idle: memory held at or below it.
    Free: neither. Broken: a GPU the inventory expects that reported nothing usable while
    others on the host did. A host with no sample at all is not broken but unknown.
    """
    gpus: dict[int, dict[str, float]] = {}
    for name, value in latest.items():
        if m := GPU_FIELD.match(name):
            gpus.setdefault(int(m["index"]), {})[m["field"]] = value
    counts = {"busy": 0, "held_idle": 0, "free": 0, "broken": 0}
    for fields in gpus.values():
        mem, util = fields.get("mem_used_mib"), fields.get("util_pct")
        if mem is None or util is None:
            counts["broken"] += 1
        elif util > idle_util_pct:
            counts["busy"] += 1
        elif mem >= idle_mem_mib:
            counts["held_idle"] += 1
        else:
            counts["free"] += 1
    disks = latest_disks(latest)
    if not gpus:
        return HostGpus(host, unsampled=expected, disks=disks)
    counts["broken"] += max(0, expected - len(gpus))
    return HostGpus(host, **counts, disks=disks)


def latest_disks(latest: Mapping[str, float]) -> tuple[DiskFact, ...]:
    """Each mount's latest fill. No time until full here: the Home reads only the last
    minutes, too short a trend to extrapolate (the digest ranks by it over its period)."""
    mounts: dict[str, dict[str, float]] = {}
    for name, value in latest.items():
        if m := DISK_FIELD.match(name):
            mounts.setdefault(m["mount"], {})[m["field"]] = value
    return tuple(DiskFact(mount, 100.0 * f["used_bytes"] / f["size_bytes"], None)
                 for mount, f in sorted(mounts.items())
                 if f.get("size_bytes") and "used_bytes" in f)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000)}}


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": clip(text, 150)}}


def host_line(h: HostGpus) -> str:
    """``*gpu-01* · 8 GPUs: 0 busy · 8 held idle · 0 free · 0 broken``."""
    if h.unsampled and not h.total:
        return strings.HOME_HOST_UNSAMPLED.format(host=escape(h.host), n=h.unsampled)
    badge = ":red_circle: " if h.held_idle or h.broken else ""
    return strings.HOME_HOST.format(badge=badge, host=escape(h.host), n=h.total,
                                    busy=h.busy, idle=h.held_idle, free=h.free, broken=h.broken)


def coarse_age(now: float, since: float) -> str:
    """Whole minutes at least, so a refresh is not triggered by the seconds ticking."""
    return strings.HOME_AGE_NEW if now - since < 60 else fmt.age(now, since)


def incident_line(i: IncidentRow, now: float) -> str:
    return strings.HOME_INCIDENT.format(
        icon=STATE_ICON.get(i.state, ":white_circle:"), id=escape(i.id), host=escape(i.host),
        kind=escape(i.kind), state=i.state.replace("_", " "), age=coarse_age(now, i.opened_at))


def job_line(j: JobRow) -> str:
    pct = fmt.percent(j.done / j.total if j.total else 0.0)
    return strings.HOME_JOB.format(name=escape(j.name), host=escape(j.host),
                                   bar=bar(j.done, j.total), pct=pct, done=fmt.count(j.done),
                                   total=fmt.count(j.total), rate=fmt.rate(j.rate))


def _list(title: str, lines: Sequence[str], empty: str) -> list[dict[str, Any]]:
    """A header and the lines that fit; "N of M shown" when some do not."""
    shown = list(lines[:MAX_ROWS])
    body = "\n".join(shown) if shown else f"_{empty}_"
    if len(lines) > MAX_ROWS:
        tail = "\n" + strings.SHOWN_OF.format(shown=MAX_ROWS, total=len(lines))
        body = clip(body, 3000 - len(tail)) + tail
    return [_header(title), _section(body)]


def host_facts(fleet: Fleet) -> list[HostFacts]:
    """The ranking's facts as of now: GPUs held idle, disks' fill, open incidents (and
    the failed ones), hours drained."""
    opened, failed = Counter[str](), Counter[str]()
    for i in fleet.incidents:
        opened[i.host] += 1
        failed[i.host] += i.state in FAILED_STATES
    drained = {d.name: (fleet.now - d.since) / 3600 for d in fleet.drained if d.since is not None}
    gpus = {h.host: h for h in fleet.hosts}
    names = sorted(set(gpus) | set(opened) | set(drained))
    return [HostFacts(n, gpus[n].total if n in gpus else 0,
                      disks=gpus[n].disks if n in gpus else (), incidents=opened[n],
                      failed=failed[n], drained_h=drained.get(n),
                      held_idle_now=gpus[n].held_idle if n in gpus else 0) for n in names]


def summary_line(fleet: Fleet, needs: int) -> str:
    h = fleet.hosts
    return strings.HOME_SUMMARY.format(
        hosts=fmt.count(len(h)), gpus=fmt.count(sum(x.total for x in h)),
        busy=fmt.count(sum(x.busy for x in h)), idle=fmt.count(sum(x.held_idle for x in h)),
        free=fmt.count(sum(x.free for x in h)), broken=fmt.count(sum(x.broken for x in h)),
        needs=fmt.count(needs), open=fmt.count(len(fleet.incidents)),
        drained=fmt.count(len(fleet.drained)))


def render_home(fleet: Fleet) -> dict[str, Any]:
    """The ``views.publish`` view: the fleet in one line, the hosts that need a person
    (``bot.domain.fleet_needs``, as the digest ranks them), then the lists."""
    needs = rank_hosts(host_facts(fleet))
    rank = {n.host: k for k, n in enumerate(needs)}
    hosts = sorted(fleet.hosts, key=lambda h: (rank.get(h.host, len(rank)),
                                               -(h.held_idle + h.broken), h.host))
    incidents = sorted(fleet.incidents, key=lambda i: i.opened_at)
    updated = strings.HOME_UPDATED.format(when=fmt.clock(fleet.now, now=fleet.now))
    total = len({h.host for h in fleet.hosts} | set(rank))
    blocks = [
        _header(strings.HOME_FLEET), _section(summary_line(fleet, len(needs))),
        *(_section(t) for t in needs_texts(needs, total, strings.NEEDS_REST_HOME,
                                           sections=NEEDS_SECTIONS)),
        *_list(strings.HOME_HOSTS, [host_line(h) for h in hosts], strings.HOME_NO_HOSTS),
        *_list(strings.HOME_INCIDENTS, [incident_line(i, fleet.now) for i in incidents],
               strings.HOME_NO_INCIDENTS),
        *_list(strings.HOME_JOBS, [job_line(j) for j in fleet.jobs], strings.HOME_NO_JOBS),
        *_maintenance(fleet),
        *_drained(fleet),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": updated}]},
    ]
    return {"type": "home", "blocks": blocks[:MAX_BLOCKS]}


def maintenance_line(w: MaintenanceWindow, now: float) -> str:
    return strings.HOME_MAINTENANCE_LINE.format(
        now=strings.HOME_MAINTENANCE_NOW if w.window.contains(now) else "", hosts=w.hosts,
        kinds=f" ({', '.join(w.kinds)})" if w.kinds else "", every=w.window.text,
        reason=f" — {w.reason}" if w.reason else "")


def _maintenance(fleet: Fleet) -> list[dict[str, Any]]:
    """Only when windows exist: a fleet without them keeps its three lists."""
    if not fleet.maintenance:
        return []
    return _list(strings.HOME_MAINTENANCE,
                 [maintenance_line(w, fleet.now) for w in fleet.maintenance], "")


def drained_line(d: DrainedNode, now: float) -> str:
    return strings.SLURM_DRAINED_LINE.format(
        node=escape(d.name), view=d.view,
        age=coarse_age(now, d.since) if d.since is not None else "an unknown time",
        who=escape(d.who), reason=escape(clip(d.reason or "none", 120)))


def _drained(fleet: Fleet) -> list[dict[str, Any]]:
    """Only when a Slurm node is drained: so that none piles up unread (issue 26)."""
    if not fleet.drained:
        return []
    return _list(strings.HOME_DRAINED, [drained_line(d, fleet.now) for d in fleet.drained], "")
