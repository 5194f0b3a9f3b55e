"""``ParamikoPool``: the ``SSHRunner`` for real hosts and sim hosts.

One authenticated transport per host, shared by every probe, action and incident
(thread-safe); commands run as parallel channels on it, at most ``max_sessions`` at
once (sshd's MaxSessions). Concurrent callers for a host that is not connected yet
wait on one connect attempt instead of each paying the connect deadline. Idle
connections are closed after ``idle_expiry_s``; a connection that died is replaced once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from bot.domain.findings import ProbeResult
from bot.ssh.base import NOT_SENT_ERRORS, Command, HostUnreachable, SSHTarget
from bot.ssh.channel import execute
from bot.ssh.connect import open_transport
from bot.ssh.lib import paramiko
from bot.ssh.settings import SSHSettings

log = logging.getLogger(__name__)
# Refused channels are retried and failures reported as results; paramiko would log them
# at ERROR on every retry.
logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)
_Key = tuple[str, str, int, str | None, str | None]
CHANNEL_RETRY_S = 0.05
REFUSED, NO_ANSWER = NOT_SENT_ERRORS[0], NOT_SENT_ERRORS[2]


class _Stale(Exception):
    """The transport died under us: reconnect once."""


@dataclass
class _Conn:
    transport: paramiko.Transport
    slots: threading.BoundedSemaphore
    last_used: float = field(default_factory=time.monotonic)
    in_use: int = 0


def _key(target: SSHTarget) -> _Key:
    return (target.user, target.host, target.port, target.key_path, target.known_hosts)


class ParamikoPool:
    """Thread-safe pool of one SSH connection per host; see the module docstring."""

    def __init__(self, settings: SSHSettings | None = None) -> None:
        self.settings = settings or SSHSettings.model_validate({})
        self._lock = threading.Lock()
        self._conns: dict[_Key, _Conn] = {}
        self._pending: dict[_Key, Future[_Conn]] = {}
        self._closed = threading.Event()
        self._reaper: threading.Thread | None = None

    # --- SSHRunner -----------------------------------------------------------------------
    def run(self, target: SSHTarget, command: Command) -> ProbeResult:
        """Run one command; ``SSHError`` if the host cannot be reached."""
        for attempt in (1, 2):
            conn = self._acquire(target)
            try:
                return self._run_on(conn, target, command)
            except _Stale as exc:
                self._drop(_key(target), conn)
                if attempt == 2:
                    raise HostUnreachable(f"{target.address}: connection lost: {exc}") from None
            finally:
                self._release(conn)
        raise AssertionError("unreachable")  # pragma: no cover

    def run_many(self, target: SSHTarget, commands: Sequence[Command]) -> list[ProbeResult]:
        """Connect once, then run ``commands`` as parallel channels; results in input order."""
        if not commands:
            return []
        self._release(self._acquire(target))  # one connect; its failure raises once
        workers = min(len(commands), self.settings.max_sessions)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ssh-ch") as ex:
            futures = [ex.submit(self.run, target, c) for c in commands]
            return [f.result() for f in futures]

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.transport.close()

    def __enter__(self) -> ParamikoPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def connection_count(self) -> int:
        """Open connections (for tests and metrics)."""
        with self._lock:
            return sum(1 for c in self._conns.values() if c.transport.is_active())

    # --- connections ---------------------------------------------------------------------
    def _acquire(self, target: SSHTarget) -> _Conn:
        key = _key(target)
        with self._lock:
            self._start_reaper()
            conn = self._conns.get(key)
            if conn is not None and conn.transport.is_active():
                conn.in_use += 1
                return conn
            self._conns.pop(key, None)
            future = self._pending.get(key)
            owner = future is None
            if future is None:
                future = self._pending[key] = Future()
        conn = self._connect(target, key, future) if owner else future.result()
        with self._lock:
            conn.in_use += 1
        return conn

    def _connect(self, target: SSHTarget, key: _Key, future: Future[_Conn]) -> _Conn:
        try:
            transport = open_transport(target, self.settings.connect_timeout_s)
        except BaseException as exc:
            with self._lock:
                self._pending.pop(key, None)
            future.set_exception(exc)
            raise
        conn = _Conn(transport, threading.BoundedSemaphore(self.settings.max_sessions))
        with self._lock:
            self._conns[key] = conn
            self._pending.pop(key, None)
        future.set_result(conn)
        return conn

    def _release(self, conn: _Conn) -> None:
        with self._lock:
            conn.in_use -= 1
            conn.last_used = time.monotonic()

    def _drop(self, key: _Key, conn: _Conn) -> None:
        with self._lock:
            if self._conns.get(key) is conn:
                del self._conns[key]
        conn.transport.close()

    def _start_reaper(self) -> None:
        """Start the idle reaper on first use (caller holds the lock)."""
        if self._reaper is None and not self._closed.is_set():
            self._reaper = threading.Thread(target=self._reap_loop, name="ssh-reaper", daemon=True)
            self._reaper.start()

    def _reap_loop(self) -> None:
        period = min(max(self.settings.idle_expiry_s / 4, 0.05), 30.0)
        while not self._closed.wait(period):
            self.reap()

    def reap(self, now: float | None = None) -> int:
        """Close connections idle longer than ``idle_expiry_s``; return how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            idle = [(k, c) for k, c in self._conns.items()
                    if c.in_use == 0 and now - c.last_used >= self.settings.idle_expiry_s]
            for k, _ in idle:
                del self._conns[k]
        for _, conn in idle:
            conn.transport.close()
        return len(idle)

    # --- channels ------------------------------------------------------------------------
    def _run_on(self, conn: _Conn, target: SSHTarget, command: Command) -> ProbeResult:
        start = time.monotonic()
        wait_until = start + command.timeout_s
        if not conn.slots.acquire(timeout=command.timeout_s):
            # its deadline passed while it queued: a timeout, as if it had run that long
            return _failed(command, start, NOT_SENT_ERRORS[1], timed_out=True)
        try:
            chan = self._open_channel(conn, wait_until)
            if isinstance(chan, str):
                return _failed(command, start, chan, timed_out=chan == NO_ANSWER)
            try:
                return execute(chan, command, max_bytes=self.settings.max_output_bytes)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                return _failed(command, start, f"channel failed: {exc}")
        finally:
            conn.slots.release()

    def _open_channel(self, conn: _Conn, wait_until: float) -> paramiko.Channel | str:
        """A session channel, retrying briefly if the server's session limit is lower than
        ours; else why there is none: refused, or no answer at all (a frozen host)."""
        while True:
            try:
                return conn.transport.open_session(timeout=self.settings.connect_timeout_s)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                # paramiko hands a refusal's ChannelException to whichever thread asks
                # first; others see a bare SSHException. A live transport means "refused",
                # unless the open itself timed out: the host said nothing at all.
                if not conn.transport.is_active():
                    raise _Stale(str(exc) or type(exc).__name__) from None
                if time.monotonic() + CHANNEL_RETRY_S > wait_until:
                    return NO_ANSWER if "timeout" in str(exc).lower() else REFUSED
                time.sleep(CHANNEL_RETRY_S)


def _failed(command: Command, start: float, reason: str, *, timed_out: bool = False
            ) -> ProbeResult:
    return ProbeResult(name=command.name, command=command.argv_text, exit_status=None,
                       duration_s=time.monotonic() - start, error=reason, timed_out=timed_out)
