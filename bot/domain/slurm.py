"""A Slurm node and a job on it, as the controller reports them (pure data).

The parsers in ``playbooks/parsers/slurm.py`` build these from ``scontrol``/``squeue``
output; the captured state of a drain (``bot/domain/host_state.py``) keeps them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BOT_PREFIX = "incident-bot"  # every reason the bot writes starts with it
_INCIDENT = re.compile(r"^incident-bot (?P<id>[A-Za-z0-9][A-Za-z0-9._-]{0,63}):")
_BUSY = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


@dataclass(frozen=True)
class SlurmNode:
    """One node as the controller sees it."""

    name: str
    base: str  # IDLE | ALLOCATED | MIXED | DOWN | ...
    flags: tuple[str, ...] = ()  # DRAIN, NOT_RESPONDING, COMPLETING, ...
    reason: str = ""
    reason_user: str = ""
    reason_time: str = ""

    @property
    def state(self) -> str:
        return "+".join((self.base, *self.flags))

    @property
    def drain(self) -> bool:
        return "DRAIN" in self.flags or self.base in ("DRAIN", "DRAINED", "DRAINING")

    @property
    def draining(self) -> bool:
        """Marked to drain while jobs still run on it (``sinfo``: draining)."""
        return self.drain and (self.base in _BUSY or "COMPLETING" in self.flags
                               or self.base == "DRAINING")

    @property
    def drained(self) -> bool:
        """Marked to drain and nothing runs on it any more (``sinfo``: drained)."""
        return self.drain and not self.draining

    @property
    def usable(self) -> bool:
        """Takes new jobs: no drain, not down, answering."""
        return (self.base in ("IDLE", "MIXED", "ALLOCATED") and not self.drain
                and "NOT_RESPONDING" not in self.flags and "DOWN" not in self.flags)

    @property
    def by_bot(self) -> bool:
        """The reason was written by incident-bot (a person's reason never starts so)."""
        return self.reason.startswith(BOT_PREFIX)

    @property
    def incident(self) -> str | None:
        """The incident a bot-written reason names (``incident-bot INC-7: ...``)."""
        m = _INCIDENT.match(self.reason)
        return m.group("id") if m else None

    @property
    def view(self) -> str:
        """One word for people, as ``sinfo`` says it: DRAINING, DRAINED, IDLE, ..."""
        if self.drain:
            return "DRAINING" if self.draining else "DRAINED"
        return self.base + ("*" if "NOT_RESPONDING" in self.flags else "")


@dataclass(frozen=True)
class SlurmJob:
    """A job still on the node (``squeue -o '%i|%u|%j|%L|%T'``)."""

    job_id: str
    user: str
    name: str
    time_left: str  # as squeue prints it: 1:29:58, 2-03:04:05, UNLIMITED
    state: str


@dataclass(frozen=True)
class DrainedNode:
    """A node out of the scheduler, as the lists people read show it (``/ir drained``, the
    Home tab, the digest): so that drained nodes do not pile up until someone reads sinfo."""

    name: str
    view: str  # DRAINING | DRAINED
    who: str  # the Slurm user who set the reason ("unknown" when Slurm does not say)
    reason: str
    since: float | None  # when the reason was set (Unix time); None when unknown
    by_bot: bool = False
    incident: str | None = None  # the incident a bot-written reason names


def overdue_drained(nodes: list[DrainedNode], now: float, max_age_s: float,
                    open_incidents: set[str]) -> list[DrainedNode]:
    """Nodes the bot drained more than ``max_age_s`` ago whose incident is no longer open
    (pure): nobody will return them, so escalation says so once."""
    return [n for n in nodes if n.by_bot and n.since is not None and now - n.since > max_age_s
            and n.incident not in open_incidents]
