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
printf %s "$SSH_ORIGINAL_COMMAND" > "$d/$k.cmd"
t0=$(date +%s%N)
{real} "$@" > "$d/$k.out" 2> "$d/$k.err"; rc=$?
t1=$(date +%s%N)
echo "$(( (t1 - t0) / 1000000 ))" | awk '{{printf "%.3f", $1 / 1000}}' > "$d/$k.dur"
echo "$rc" > "$d/$k.rc"; cat "$d/$k.out"; cat "$d/$k.err" >&2; exit "$rc"
"""

NULL = """#!/bin/sh
exit 0
"""


def _install(host: SimHost, script: str) -> Path:
    """``script`` becomes the host's ForceCommand; returns the real session it wraps."""
    session = host.workdir / "bin" / "sim-session"
    real = session.with_name("sim-session.real")
    if not real.exists():
        session.rename(real)
    staged = session.with_name("sim-session.new")
    staged.write_text(script)
    staged.chmod(0o755)
    staged.replace(session)  # a session starting now runs the old script or the new one
    return real


def _arm(rec: Path, key: str) -> str | None:
    """One ``case`` arm answering a recorded command; None when its bytes cannot be a
    shell literal (a NUL, or not UTF-8)."""
    try:
        command = (rec / f"{key}.cmd").read_text()
        out, err = (rec / f"{key}.out").read_text(), (rec / f"{key}.err").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if "\0" in out + err + command:
        return None
    dur, rc = (rec / f"{key}.dur").read_text().strip(), int((rec / f"{key}.rc").read_text())
    return (f"{shlex.quote(command)}) sleep {dur}; printf %s {shlex.quote(out)}; "
            f"printf %s {shlex.quote(err)} >&2; exit {rc};;")


def replay_script(rec: Path, real: str) -> str:
    arms = [a for k in sorted(p.stem for p in rec.glob("*.rc")) if (a := _arm(rec, k))]
    return "\n".join(["#!/bin/sh", 'case "$SSH_ORIGINAL_COMMAND" in', *arms,
                      f'*) exec {shlex.quote(real)} "$@";;', "esac", ""])


def start_recording(host: SimHost) -> Path:
    """From now on ``host`` records every session it answers; returns where."""
    rec = Path(tempfile.mkdtemp(prefix="ib-fleet-rec-"))
    real = host.workdir / "bin" / "sim-session.real"
    _install(host, RECORD.format(rec=shlex.quote(str(rec)), real=shlex.quote(str(real))))
    return rec


def replay_on(host: SimHost, rec: Path) -> None:
    """``host`` answers recorded commands from ``rec`` (others through its real session)."""
    real = host.workdir / "bin" / "sim-session.real"
    _install(host, replay_script(rec, str(real)))


def null_on(host: SimHost) -> None:
    """``host`` answers every command with nothing and exit status 0, at once."""
    _install(host, NULL)


def recorded(rec: Path) -> int:
    return len(list(rec.glob("*.rc")))
