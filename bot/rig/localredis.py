"""Start a private ``redis-server`` on a free loopback port (demo and tests).

AOF with ``appendfsync always``: an alert answered 2xx is on disk. Torn down by PID.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.errors import UserError
from bot.core.procs import free_port, stop_child


@dataclass
class LocalRedis:
    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    _owns_dir: bool = field(default=False, repr=False)
    # more redis-server arguments (fault tests: ``--enable-debug-command local``, ...)
    args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0, *, loading_ok: bool = False) -> LocalRedis:
        """Start and wait until it answers PING (``loading_ok``: or answers LOADING, still
        reading its AOF: fault tests catch that window)."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise UserError("redis-server not found: install Debian's redis-server "
                            "(scripts/setup.sh does)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
                "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning",
                *self.args]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_ready(timeout_s, (b"+PONG", b"-LOADING") if loading_ok else (b"+PONG",))
        return self

    def _wait_ready(self, timeout_s: float, answers: tuple[bytes, ...] = (b"+PONG",)) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise UserError(f"redis-server exited at start: {err.strip()[:300]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(answers):
                        return
            except OSError:
                time.sleep(0.05)
        raise UserError(f"redis-server did not answer on port {self.port} within {timeout_s}s")

    def kill(self) -> None:
        """SIGKILL (benchmarks and tests use it to prove nothing acknowledged is lost)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def wipe(self, *args: str) -> None:
        """SIGKILL, delete its data (AOF and all), start empty on the same port: a lost
        volume, or a failover to an empty replica, as the bot sees it. ``args`` replace
        the extra arguments for this start."""
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)
        if args:
            self.args = args
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            stop_child(self.proc)
        if self._owns_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_local_redis(workdir: Path | None = None, args: tuple[str, ...] = ()) -> LocalRedis:
    owns = workdir is None
    path = Path(tempfile.mkdtemp(prefix="ib-redis-")) if workdir is None else workdir
    server = LocalRedis(port=free_port(), workdir=path, _owns_dir=owns, args=args)
    return server.start()
