"""A real ``redis-server`` made to refuse, the ways a production one does (issue 39).

Each switch provokes the refusal for real, with the server's own commands: out of memory
(``maxmemory`` under ``noeviction``), read-only (``REPLICAOF`` a primary that is not
there: a failover left us on a replica), MISCONF (a failed ``BGSAVE`` with
``stop-writes-on-bgsave-error``), too many clients (``maxclients``), a timeout
(``DEBUG SLEEP`` past the client's socket timeout), LOADING (a restart that loads its AOF
slowly, ``key-load-delay``). The server must be started with ``FAULT_ARGS``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from redis import Redis
from redis.exceptions import RedisError

from bot.core.procs import free_port
from bot.rig.localredis import LocalRedis

FAULT_ARGS = ("--enable-debug-command", "local", "--enable-protected-configs", "yes")


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


class RedisFaults:
    """Switch one refusal on and off on ``server`` (its own admin connection)."""

    def __init__(self, server: LocalRedis) -> None:
        self.server = server
        self.admin = Redis(port=server.port, decode_responses=True, socket_timeout=30)
        self._dir = str(server.workdir)

    def close(self) -> None:
        self.admin.close()

    # --- out of memory ---------------------------------------------------------------
    def out_of_memory(self, maxmemory: str = "1") -> None:
        """``noeviction`` and a limit below what is used: every write is refused (OOM)."""
        self.admin.config_set("maxmemory-policy", "noeviction")
        self.admin.config_set("maxmemory", maxmemory)

    def fill(self, maxmemory: str = "2mb", chunk: int = 64 * 1024) -> int:
        """``maxmemory`` (2 MB by default) and junk written until Redis refuses: full. The
        limit is then pinned just under what is used, so every write stays refused (at
        the edge a freed client buffer would let a small write through now and then)."""
        self.admin.config_set("maxmemory-policy", "noeviction")
        self.admin.config_set("maxmemory", maxmemory)
        n = 0
        try:
            while n < 10_000:
                self.admin.set(f"ballast:{n}", "x" * chunk)
                n += 1
        except RedisError:
            used = int(self.admin.info("memory")["used_memory"])
            self.admin.config_set("maxmemory", str(max(1, used - 2 * chunk)))
            return n
        raise AssertionError("Redis never refused a write under maxmemory")

    def lift_memory(self) -> None:
        self.admin.config_set("maxmemory", "0")
        keys = self.admin.keys("ballast:*")
        for n in range(0, len(keys), 5000):
            self.admin.delete(*keys[n:n + 5000])

    # --- read-only: a replica of a primary that is not there ---------------------------
    def read_only(self) -> None:
        self.admin.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))

    def primary(self) -> None:
        self.admin.execute_command("REPLICAOF", "NO", "ONE")

    # --- MISCONF: snapshots fail, writes stop --------------------------------------------
    def misconf(self) -> None:
        self.admin.config_set("save", "3600 1")
        self.admin.config_set("dir", "/proc/1")  # nothing can be written there
        self.admin.bgsave()
        wait_for(lambda: self.admin.info("persistence")["rdb_last_bgsave_status"] == "err",
                 10, "the failed BGSAVE")

    def clear_misconf(self) -> None:
        self.admin.config_set("dir", self._dir)
        self.admin.bgsave()
        wait_for(lambda: self.admin.info("persistence")["rdb_last_bgsave_status"] == "ok",
                 10, "a BGSAVE that works")
        self.admin.config_set("save", "")

    # --- LOADING: a restart that reads its AOF slowly ---------------------------------------
    def restart_loading(self, keys: int = 30_000, delay_us: int = 100) -> None:
        """Restart with ``keys`` ballast keys loaded at ``delay_us`` each: LOADING for about
        ``keys × delay_us`` (3 s by default), then as it was (the ballast removed)."""
        with self.admin.pipeline(transaction=False) as pipe:
            for n in range(keys):
                pipe.set(f"ballast:{n}", "x")
            pipe.execute()
        base = self.server.args
        self.server.args = (*base, "--key-load-delay", str(delay_us))
        self.server.kill()
        self.server.start(loading_ok=True)
        self.server.args = base

    def loaded(self) -> None:
        """Wait for the load to end, then drop the ballast."""
        def done() -> bool:
            try:
                return self.admin.info("persistence")["loading"] == 0
            except RedisError:
                return False

        wait_for(done, 60, "the AOF load")
        keys = self.admin.keys("ballast:*")
        for n in range(0, len(keys), 5000):
            self.admin.delete(*keys[n:n + 5000])

    # --- too many clients, timeouts ------------------------------------------------------
    def max_clients(self, n: int) -> None:
        self.admin.config_set("maxclients", str(n))

    def sleep(self, seconds: float) -> threading.Thread:
        """``DEBUG SLEEP`` on its own connection: the server answers nobody meanwhile."""
        def run() -> None:
            with Redis(port=self.server.port, socket_timeout=seconds + 10) as conn:
                conn.execute_command("DEBUG", "SLEEP", str(seconds))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        probe = Redis.from_url(self.server.url, socket_timeout=0.2)  # no retries

        def silent() -> bool:  # the state: the server answers nobody
            try:
                probe.ping()
                return False
            except RedisError:
                return True

        try:
            wait_for(silent, min(seconds, 10), "DEBUG SLEEP to begin")
        finally:
            probe.close()
        return thread
