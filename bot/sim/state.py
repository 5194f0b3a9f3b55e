"""The running sim host's state file. Stdlib only and light on imports: tools load it on
every command. Mutations happen under ``fcntl.flock`` on a side lock file and are written
by rename, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
ENV_DIR = "INCIDENT_BOT_SIM_DIR"

State = dict[str, Any]


def write_state(workdir: str | os.PathLike[str], state: State) -> None:
    tmp = os.path.join(workdir, f".{STATE_FILE}.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh, separators=(",", ":"))
    os.replace(tmp, os.path.join(workdir, STATE_FILE))


@contextlib.contextmanager
def locked(workdir: str | os.PathLike[str]) -> Iterator[None]:
    fd = os.open(os.path.join(workdir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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
        with open(os.path.join(self.workdir, STATE_FILE), encoding="utf-8") as fh:
            state: State = json.loads(fh.read())
        pending = state["pending"]
        if pending and pending[0]["at"] <= self.now():
            with self.mutate() as fresh:
                return fresh
        return state

    @contextlib.contextmanager
    def mutate(self) -> Iterator[State]:
        from bot.sim.engine import apply_due

        with locked(self.workdir):
            with open(os.path.join(self.workdir, STATE_FILE), encoding="utf-8") as fh:
                text = fh.read()
            state: State = json.loads(text)
            apply_due(state, self.now())
            yield state
            new = json.dumps(state, separators=(",", ":"))
            if new != text:
                write_state(self.workdir, state)

    def print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def error(self, text: str) -> None:
        self.err.write(text + "\n")
