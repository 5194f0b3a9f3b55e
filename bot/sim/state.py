"""The running sim host's state file, read by a fresh interpreter on every command.

The tools read ``state.bin`` (``marshal``: built in, so a read-only command imports no
``json``, and with it no ``re``: ~20 ms of a ~40 ms command). Changes happen under
``fcntl.flock`` on a side lock file and are written by rename, so a reader never sees
half a file and needs no lock; a writer rounds the state through JSON first (what it
would be after ``json`` dump and load) and mirrors it to ``state.json`` for people.
Typing names are imported only by the type checker (``typing`` costs ~5 ms a command).
"""

from __future__ import annotations

import fcntl
import marshal
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TextIO

    State = dict[str, Any]

STATE_FILE = "state.bin"
MIRROR_FILE = "state.json"
LOCK_FILE = "state.lock"
ENV_DIR = "INCIDENT_BOT_SIM_DIR"


def _replace(workdir: str, name: str, data: bytes) -> None:
    tmp = os.path.join(workdir, f".{name}.{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, os.path.join(workdir, name))


def write_state(workdir: str | os.PathLike[str], state: State) -> None:
    """Normalize through JSON (tuples become lists, keys strings), then write both files."""
    import json

    text = json.dumps(state, separators=(",", ":"))
    workdir = os.fspath(workdir)
    _replace(workdir, MIRROR_FILE, text.encode())
    _replace(workdir, STATE_FILE, marshal.dumps(json.loads(text)))


def load_state(workdir: str | os.PathLike[str]) -> State:
    """The state as last written, without due events applied (``SimCall.read`` applies them)."""
    with open(os.path.join(workdir, STATE_FILE), "rb") as fh:
        state: State = marshal.loads(fh.read())
    return state


class locked:
    """``with locked(workdir):`` holds the host's write lock (a class: no contextlib import)."""

    def __init__(self, workdir: str | os.PathLike[str]) -> None:
        self.path = os.path.join(workdir, LOCK_FILE)
        self.fd = -1

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


class _Mutation:
    """``with ctx.mutate() as state:`` loads under the lock, applies due events, and writes
    back only if the block ended normally and the state changed."""

    def __init__(self, call: SimCall) -> None:
        self.call = call
        self.lock = locked(call.workdir)
        self.before: State = {}
        self.state: State = {}

    def __enter__(self) -> State:
        from bot.sim.engine import apply_due

        self.lock.__enter__()
        try:
            self.before = load_state(self.call.workdir)
            self.state = load_state(self.call.workdir)
            apply_due(self.state, self.call.now())
        except BaseException:
            self.lock.__exit__()
            raise
        return self.state

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None and self.state != self.before:
                write_state(self.call.workdir, self.state)
        finally:
            self.lock.__exit__()


class SimCall:
    """What a tool gets: the host's state, its streams and a clock (all replaceable)."""

    def __init__(self, workdir: str | os.PathLike[str], out: TextIO | None = None,
                 err: TextIO | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.workdir = os.fspath(workdir)
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.clock = clock
        self.sleep = sleep

    def now(self) -> float:
        return self.clock()

    def read(self) -> State:
        """Current state, with due events (respawns, delayed stops) applied first.

        Without a due event it is a plain load, no lock: writers replace the file by
        rename, so a reader sees the state before or after a change, never half of one.
        """
        state = load_state(self.workdir)
        pending = state["pending"]
        if pending and pending[0]["at"] <= self.now():
            with self.mutate() as fresh:
                return fresh
        return state

    def mutate(self) -> _Mutation:
        return _Mutation(self)

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def error(self, text: str) -> None:
        self.err.write(text + "\n")
