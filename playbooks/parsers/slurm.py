"""Slurm's own words about a node: ``scontrol show node -o NODE`` and ``squeue -h -w NODE``.

Pure. The node's ``State=`` is a base state plus ``+FLAG``s (``ALLOCATED+DRAIN`` is what
``sinfo`` calls draining, ``IDLE+DRAIN`` drained); a trailing ``*`` is "not responding" in
the short spelling. ``Reason=`` runs to the end of its line, with ``[user@time]`` after it
when Slurm knows who set it. Node and job names are untrusted text: callers validate them
(``bot.domain.validate``) before either reaches a command line.
"""

from __future__ import annotations

import calendar
import re
import time

from bot.domain.slurm import SlurmJob, SlurmNode

SQUEUE_FORMAT = "%i|%u|%j|%L|%T"  # id, user, name, time left, state

_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_NAME = re.compile(r"(?:^|\s)NodeName=(\S+)")
_REASON = re.compile(r"(?:^|\s)Reason=([^\n]*)")
_SET_BY = re.compile(r"^(.*?)\s*\[([^@\]\s]+)@([^\]\s]+)\]")
# cgroup v1 ``/slurm/uid_1000/job_123/step_0``, v2 ``/system.slice/slurmstepd.scope/job_123/``
_JOB_CGROUP = re.compile(r"(?:/slurm(?:_[^/]*)?/uid_\d+|/slurmstepd\.scope)/job_(\d+)(?:/|$)")
# slurmstepd's process title: ``slurmstepd: [123.batch]``, ``[123.0]``, ``[123.extern]``
_STEPD = re.compile(r"^slurmstepd: \[(\d+)\.[A-Za-z0-9_]+\]")


def split_state(word: str) -> tuple[str, tuple[str, ...]]:
    """``ALLOCATED+DRAIN`` → ("ALLOCATED", ("DRAIN",)); ``IDLE*`` adds NOT_RESPONDING."""
    parts = [p for p in word.strip().upper().split("+") if p]
    if not parts:
        return "UNKNOWN", ()
    flags = list(parts[1:])
    if parts[0].endswith("*"):
        parts[0] = parts[0].rstrip("*")
        flags.append("NOT_RESPONDING")
    return parts[0], tuple(dict.fromkeys(flags))


def _reason(text: str) -> tuple[str, str, str]:
    m = _REASON.search(text)
    if not m:
        return "", "", ""
    raw = m.group(1).strip()
    who = _SET_BY.match(raw)
    if who:
        return who.group(1).strip(), who.group(2), who.group(3)
    return ("" if raw in ("(null)", "none") else raw), "", ""


def parse_node(text: str) -> SlurmNode | None:
    """``scontrol show node [-o] NODE``: the first node, or None ("Node x not found")."""
    name, state = _NAME.search(text), _STATE.search(text)
    if name is None or state is None:
        return None
    base, flags = split_state(state.group(1))
    reason, user, when = _reason(text)
    return SlurmNode(name.group(1), base, flags, reason, user, when)


_NOT_FOUND = re.compile(r"^Node \S+ not found$")


def node_error(text: str) -> str | None:
    """scontrol's own words when the node is unknown ("Node nosuch not found"): why
    ``parse_node`` gave None."""
    return next((ln.strip() for ln in text.splitlines() if _NOT_FOUND.match(ln.strip())), None)


def parse_nodes(text: str) -> list[SlurmNode]:
    """``scontrol show node -o`` (every node, one line each): the nodes it could read."""
    nodes = (parse_node(line) for line in text.splitlines() if line.strip())
    return [n for n in nodes if n is not None]


def reason_epoch(node: SlurmNode, utc_offset_s: float = 0.0) -> float | None:
    """When the reason was set (``[root@2026-12-02T13:36:28]``), as a Unix time; the
    controller prints its local time, ``utc_offset_s`` ahead of UTC. None when unknown."""
    try:
        parsed = time.strptime(node.reason_time, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    return calendar.timegm(parsed) - utc_offset_s


def parse_jobs(text: str) -> list[SlurmJob]:
    """``squeue -h -w NODE -o '%i|%u|%j|%L|%T'``; a ``|`` inside a job name is kept."""
    jobs = []
    for line in text.splitlines():
        head = line.strip().split("|", 2)
        if len(head) < 3 or not head[0]:
            continue
        tail = head[2].rsplit("|", 2)
        if len(tail) < 3:
            continue
        jobs.append(SlurmJob(head[0], head[1], tail[0], tail[1], tail[2]))
    return jobs


def left_seconds(time_left: str) -> int | None:
    """squeue's ``%L`` in seconds: ``[D-]HH:MM:SS``, ``MM:SS``; None for UNLIMITED and the like."""
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", time_left.strip())
    if not m:
        return None
    days, hours, minutes, secs = (int(g) if g else 0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + secs


def job_of_cgroup(cgroup: str) -> str | None:
    """The Slurm job a process's cgroup (``ps -o cgroup``) puts it in, or None."""
    m = _JOB_CGROUP.search(cgroup)
    return m.group(1) if m else None


def job_of_stepd(args: str) -> str | None:
    """The job a ``slurmstepd`` process runs (its title), or None for any other process."""
    m = _STEPD.match(args.strip())
    return m.group(1) if m else None
