"""Run one command on one paramiko channel: wrap, drain, cap, and enforce the deadline.

The remote side gets ``timeout -k 2 N sh -c <quoted>`` so a deadline kills the
command (and its process group) on the host even if our connection is gone; the local
side stops waiting shortly after. Nothing is wrapped in ``sudo``: read-only probes need
no root, and an action's own command text says ``sudo -n`` where the host needs it
(``deploy/sudoers/incident-bot`` allows those commands and refuses any wrapper).
stdout and stderr are read in one loop so a command that fills either stream never
blocks on the other.
"""

from __future__ import annotations

import select
import shlex
import time
from dataclasses import dataclass, field

from bot.domain.findings import ProbeResult
from bot.ssh.base import Command
from bot.ssh.lib import paramiko

KILL_GRACE_S = 2  # `timeout -k`: SIGKILL this long after SIGTERM
LOCAL_SLACK_S = 1.5  # we wait this much past the remote kill before giving up locally
TIMEOUT_EXITS = (124, 137)  # GNU timeout: 124 after TERM, 128+9 after KILL
CHUNK = 65536
MAX_CHUNKS_PER_DRAIN = 64


def wrap(command: Command) -> str:
    """The exact text sent to the host: the command under a deadline on the host."""
    secs = f"{max(command.timeout_s, 0.01):g}"
    return f"timeout -k {KILL_GRACE_S} {secs} sh -c {shlex.quote(command.argv_text)}"


@dataclass
class _Capped:
    """A byte buffer that keeps at most ``cap`` bytes and remembers it dropped some."""

    cap: int
    data: bytearray = field(default_factory=bytearray)
    dropped: bool = False

    def add(self, chunk: bytes) -> None:
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        if len(chunk) > max(room, 0):
            self.dropped = True

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _drain(chan: paramiko.Channel, out: _Capped, err: _Capped) -> bool:
    """Read what is ready on both streams (a bounded amount, so an endless stream still
    lets the caller check its deadline); True once both have hit EOF."""
    for _ in range(MAX_CHUNKS_PER_DRAIN):
        if not (chan.recv_ready() or chan.recv_stderr_ready()):
            break
        if chan.recv_ready():
            out.add(chan.recv(CHUNK))
        if chan.recv_stderr_ready():
            err.add(chan.recv_stderr(CHUNK))
    ended = chan.eof_received or chan.closed
    return bool(ended) and not chan.recv_ready() and not chan.recv_stderr_ready()


def _pump(chan: paramiko.Channel, deadline: float, out: _Capped, err: _Capped) -> bool:
    """Drain until EOF and exit status, or until ``deadline``; True if the deadline hit."""
    poller = select.poll()
    poller.register(chan.fileno(), select.POLLIN)  # set on data for either stream, and on EOF
    while not _drain(chan, out, err):
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        poller.poll(min(left, 0.5) * 1000)
    return not chan.status_event.wait(max(deadline - time.monotonic(), 0.0))


def execute(chan: paramiko.Channel, command: Command, *, max_bytes: int) -> ProbeResult:
    """Run ``command`` on an open session channel and close it."""
    start = time.monotonic()
    out, err = _Capped(max_bytes), _Capped(max_bytes)
    deadline = start + command.timeout_s + KILL_GRACE_S + LOCAL_SLACK_S
    try:
        chan.exec_command(wrap(command))
        chan.shutdown_write()
        local_timeout = _pump(chan, deadline, out, err)
        status = None if local_timeout else chan.recv_exit_status()
    finally:
        chan.close()
    elapsed = time.monotonic() - start
    remote_timeout = status in TIMEOUT_EXITS and elapsed >= command.timeout_s * 0.95
    return ProbeResult(
        name=command.name, command=command.argv_text, exit_status=status, duration_s=elapsed,
        timed_out=local_timeout or remote_timeout, stdout=out.text(), stderr=err.text(),
        truncated=out.dropped or err.dropped,
    )
