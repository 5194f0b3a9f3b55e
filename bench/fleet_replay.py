"""Lightweight fleet hosts for the fan-out benchmark: real sshd, replayed answers.

A sim host runs a Python process per channel and per tool call (about 2 CPU-seconds
per vm_restart diagnosis), so on a small machine 32 of them measure the simulator, not
the bot. Here one real sim host answers a diagnosis once with every session recorded
(stdout, stderr, exit status and how long it took, keyed by the exact command the
client sent); the fleet hosts are real sshds whose ForceCommand replays those answers
after sleeping the recorded time: the same bytes over the same SSH, the same latency
per command, a few milliseconds of CPU. A command that was not recorded falls through
to the real sim session.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

from bot.sim.sshd import SimHost

RECORD = """#!/bin/sh
d={rec}; k=$(printf %s "$SSH_ORIGINAL_COMMAND" | md5sum | cut -c1-32)
t0=$(date +%s%N)
{real} "$@" > "$d/$k.out" 2> "$d/$k.err"; rc=$?
t1=$(date +%s%N)
echo "$(( (t1 - t0) / 1000000 ))" | awk '{{printf "%.3f", $1 / 1000}}' > "$d/$k.dur"
echo "$rc" > "$d/$k.rc"; cat "$d/$k.out"; cat "$d/$k.err" >&2; exit "$rc"
"""

REPLAY = """#!/bin/sh
d={rec}; k=$(printf %s "$SSH_ORIGINAL_COMMAND" | md5sum | cut -c1-32)
if [ -f "$d/$k.rc" ]; then
  sleep "$(cat "$d/$k.dur")"; cat "$d/$k.out"; cat "$d/$k.err" >&2; exit "$(cat "$d/$k.rc")"
fi
exec {real} "$@"
"""


def _wrap(host: SimHost, template: str, rec: Path) -> None:
    session = host.workdir / "bin" / "sim-session"
    real = session.with_name("sim-session.real")
    if not real.exists():
        session.rename(real)
    session.write_text(template.format(rec=shlex.quote(str(rec)), real=shlex.quote(str(real))))
    session.chmod(0o755)


def start_recording(host: SimHost) -> Path:
    """From now on ``host`` records every session it answers; returns where."""
    rec = Path(tempfile.mkdtemp(prefix="ib-fleet-rec-"))
    _wrap(host, RECORD, rec)
    return rec


def replay_on(host: SimHost, rec: Path) -> None:
    """``host`` answers recorded commands from ``rec`` (others through its real session)."""
    _wrap(host, REPLAY, rec)


def recorded(rec: Path) -> int:
    return len(list(rec.glob("*.rc")))
